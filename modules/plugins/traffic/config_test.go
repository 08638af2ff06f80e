package traffic

import (
	"testing"

	"github.com/caddy-gateway/gateway/modules/plugins/internal/plugintest"
)

// configs is what each traffic type makes of configs: the admin API's
// normalization and refusals, and the Caddyfile syntax.
var configs = []plugintest.Config{
	{
		Type: "request-id",
		Normalized: [][2]string{
			{`{}`,
				`{"header_name":"X-Request-ID","trust_incoming":true,"echo_downstream":true}`},
			{`{"trust_incoming":false,"header_name":"X-Corr"}`,
				`{"header_name":"X-Corr","trust_incoming":false,"echo_downstream":true}`},
		},
		Refused: map[string]string{
			`{"header_name":""}`:           "config.header_name",
			`{"header_name":"bad header"}`: "config.header_name",
			`{"trust_incoming":"yes"}`:     "config.trust_incoming",
			`{"echo_downstream":null}`:     "config.echo_downstream",
			`{"nope":1}`:                   "config.nope",
		},
		Caddyfile: [][2]string{
			{"gateway_request_id",
				`{"handler":"gateway_request_id","header_name":"X-Request-ID","trust_incoming":true,"echo_downstream":true}`},
			{"gateway_request_id {\n header_name X-Trace\n trust_incoming false\n}",
				`{"handler":"gateway_request_id","header_name":"X-Trace","trust_incoming":false,"echo_downstream":true}`},
		},
		BadCaddyfile: []string{
			"gateway_request_id {\n header_name \"a b\"\n}",
			"gateway_request_id {\n unknown 1\n}",
			"gateway_request_id {\n trust_incoming maybe\n}",
			"gateway_request_id X-Foo",
		},
	},
	{
		Type: "ip-restriction",
		Normalized: [][2]string{
			{`{"allow":["10.0.0.0/8"]}`,
				`{"allow":["10.0.0.0/8"],"deny":[],"status":403,"message":"forbidden"}`},
			{`{"deny":["::1","1.2.3.4"],"status":404,"message":"gone"}`,
				`{"allow":[],"deny":["::1","1.2.3.4"],"status":404,"message":"gone"}`},
		},
		Refused: map[string]string{
			`{}`:                                "config.allow",
			`{"allow":[],"deny":[]}`:            "config.allow",
			`{"allow":["10.0.0.300"]}`:          "config.allow[0]",
			`{"allow":["1.2.3.4","nope/8"]}`:    "config.allow[1]",
			`{"deny":["10.0.0.0/33"]}`:          "config.deny[0]",
			`{"deny":["1.2.3.4"],"status":200}`: "config.status",
			`{"deny":["1.2.3.4"],"status":600}`: "config.status",
			`{"deny":"1.2.3.4"}`:                "config.deny",
			`{"deny":["1.2.3.4"],"x":1}`:        "config.x",
		},
		Caddyfile: [][2]string{
			{"gateway_ip_restriction {\n allow 10.0.0.0/8 127.0.0.1\n allow ::1\n status 404\n}",
				`{"handler":"gateway_ip_restriction","allow":["10.0.0.0/8","127.0.0.1","::1"],"deny":[],"status":404,"message":"forbidden"}`},
		},
		BadCaddyfile: []string{
			"gateway_ip_restriction",
		},
	},
	{
		Type: "cors",
		Normalized: [][2]string{
			{`{}`,
				`{"allow_origins":["*"],"allow_methods":["GET","HEAD","PUT","PATCH","POST","DELETE"],"allow_headers":[],"expose_headers":[],"allow_credentials":false,"max_age_s":600}`},
			{`{"allow_origins":["https://a.example","*.example.com","http://*.example.org:8080"],"allow_credentials":true,"max_age_s":0}`,
				`{"allow_origins":["https://a.example","*.example.com","http://*.example.org:8080"],"allow_methods":["GET","HEAD","PUT","PATCH","POST","DELETE"],"allow_headers":[],"expose_headers":[],"allow_credentials":true,"max_age_s":0}`},
		},
		Refused: map[string]string{
			`{"allow_origins":["example.com"]}`:         "config.allow_origins[0]",
			`{"allow_origins":["*","https://a/b"]}`:     "config.allow_origins[1]",
			`{"allow_origins":["*.example.com:http"]}`:  "config.allow_origins[0]",
			`{"allow_origins":["https://*.*.example"]}`: "config.allow_origins[0]",
			`{"allow_methods":["GET","BAD METHOD"]}`:    "config.allow_methods[1]",
			`{"allow_headers":["a b"]}`:                 "config.allow_headers[0]",
			`{"expose_headers":["x:y"]}`:                "config.expose_headers[0]",
			`{"max_age_s":-1}`:                          "config.max_age_s",
			`{"allow_credentials":1}`:                   "config.allow_credentials",
			`{"origins":["*"]}`:                         "config.origins",
			// * with credentials would echo any origin (null too) with
			// credentials: refused, as in APISIX.
			`{"allow_credentials":true}`: "config.allow_credentials",
			`{"allow_origins":["https://a.example","*"],"allow_credentials":true}`: "config.allow_credentials",
		},
		Caddyfile: [][2]string{
			{"gateway_cors {\n allow_origins https://a.example *.example.com\n allow_methods GET\n allow_credentials\n expose_headers X-Id\n}",
				`{"handler":"gateway_cors","allow_origins":["https://a.example","*.example.com"],"allow_methods":["GET"],"allow_headers":[],"expose_headers":["X-Id"],"allow_credentials":true,"max_age_s":600}`},
		},
	},
	{
		Type: "redirect",
		Normalized: [][2]string{
			{`{"to_https":true}`,
				`{"to_https":true,"location":"","status":308,"keep_path":true}`},
			{`{"location":"https://new.example/base?from=old","status":301,"keep_path":false}`,
				`{"to_https":false,"location":"https://new.example/base?from=old","status":301,"keep_path":false}`},
		},
		Refused: map[string]string{
			`{}`: "config.location",
			`{"to_https":true,"location":"https://x.example"}`: "config.location",
			`{"location":"/relative"}`:                         "config.location",
			`{"location":"ftp://x.example"}`:                   "config.location",
			`{"location":"http://:80/"}`:                       "config.location: must have a host",
			`{"location":"https://x.example:70000"}`:           "config.location: has port 70000",
			`{"location":"https://x.example/?a=1"}`:            "config.location",
			`{"to_https":true,"status":200}`:                   "config.status",
			`{"to_https":true,"status":304}`:                   "config.status",
			`{"to_https":true,"https_port":8443}`:              "config.https_port", // internal: not part of the API
			`{"to_https":true,"keep_path":"no"}`:               "config.keep_path",
		},
		Caddyfile: [][2]string{
			{"gateway_redirect {\n to_https\n https_port 8443\n}",
				`{"handler":"gateway_redirect","to_https":true,"location":"","status":308,"keep_path":true,"https_port":8443}`},
		},
		BadCaddyfile: []string{
			"gateway_redirect {\n status 307\n}",
		},
	},
	{
		Type: "request-size-limit",
		Normalized: [][2]string{
			{`{}`,
				`{"max_bytes":1048576}`},
			{`{"max_bytes":0}`,
				`{"max_bytes":0}`},
		},
		Refused: map[string]string{
			`{"max_bytes":-1}`:   "config.max_bytes",
			`{"max_bytes":1.5}`:  "config.max_bytes",
			`{"max_bytes":"1"}`:  "config.max_bytes",
			`{"max_bytes":null}`: "config.max_bytes",
			`{"limit":1}`:        "config.limit",
		},
		Caddyfile: [][2]string{
			{"gateway_request_size_limit {\n max_bytes 10\n}",
				`{"handler":"gateway_request_size_limit","max_bytes":10}`},
		},
		BadCaddyfile: []string{
			"gateway_request_size_limit {\n max_bytes ten\n}",
		},
	},
	{
		Type: "request-termination",
		Normalized: [][2]string{
			{`{}`,
				`{"status":503,"message":"service unavailable","body":null,"content_type":"application/json"}`},
			{`{"status":200,"body":"ok","content_type":"text/plain"}`,
				`{"status":200,"message":"service unavailable","body":"ok","content_type":"text/plain"}`},
		},
		Refused: map[string]string{
			`{"status":100}`:            "config.status",
			`{"status":600}`:            "config.status",
			`{"body":5}`:                "config.body",
			`{"content_type":"a b"}`:    "config.content_type",
			`{"message":null}`:          "config.message",
			`{"status":503,"extra":""}`: "config.extra",
			// Placeholders outside the request's own are refused: they read
			// files and the environment.
			`{"body":"{file./etc/passwd}"}`:  "config.body",
			`{"body":"x {env.HOME} y"}`:      "config.body",
			`{"body":"{system.hostname}"}`:   "config.body",
			`{"body":"{http.request.body}"}`: "config.body",
		},
		Caddyfile: [][2]string{
			{"gateway_request_termination {\n status 410\n body \"<h1>gone</h1>\"\n content_type text/html\n}",
				`{"handler":"gateway_request_termination","status":410,"message":"service unavailable","body":"<h1>gone</h1>","content_type":"text/html"}`},
		},
	},
	{
		Type: "request-transform",
		Normalized: [][2]string{
			{`{}`,
				`{"remove_headers":[],"rename_headers":{},"set_headers":{},"add_headers":{},"remove_query":[],"set_query":{}}`},
			{`{"set_headers":{"X-A":"{http.request.remote.host}"},"remove_query":["q"]}`,
				`{"remove_headers":[],"rename_headers":{},"set_headers":{"X-A":"{http.request.remote.host}"},"add_headers":{},"remove_query":["q"],"set_query":{}}`},
		},
		Refused: map[string]string{
			`{"remove_headers":["ok","bad header"]}`:         "config.remove_headers[1]",
			`{"rename_headers":{"A":"b c"}}`:                 "config.rename_headers.A",
			`{"set_headers":{"a b":"x"}}`:                    "config.set_headers.a b",
			`{"add_headers":{"X":"line\nbreak"}}`:            "config.add_headers.X",
			`{"set_headers":{"X":1}}`:                        "config.set_headers.X",
			`{"remove_query":[""]}`:                          "config.remove_query[0]",
			`{"set_query":{"":"v"}}`:                         "config.set_query",
			`{"set_path":"/"}`:                               "config.set_path",
			`{"set_headers":{"X-Env":"{env.HOME}"}}`:         "config.set_headers.X-Env",
			`{"add_headers":{"X-F":"{file./etc/hostname}"}}`: "config.add_headers.X-F",
			`{"set_query":{"q":"{system.hostname}"}}`:        "config.set_query.q",
		},
		Caddyfile: [][2]string{
			{"gateway_request_transform {\n set_headers X-Real-IP {http.request.remote.host}\n set_headers X-B b\n remove_headers X-Debug X-Internal-*\n set_query source gw\n}",
				`{"handler":"gateway_request_transform","remove_headers":["X-Debug","X-Internal-*"],"rename_headers":{},"set_headers":{"X-Real-IP":"{http.request.remote.host}","X-B":"b"},"add_headers":{},"remove_query":[],"set_query":{"source":"gw"}}`},
		},
		BadCaddyfile: []string{
			"gateway_request_transform {\n set_headers X-A\n}",
		},
	},
	{
		Type: "response-transform",
		Normalized: [][2]string{
			{`{}`,
				`{"remove_headers":[],"rename_headers":{},"set_headers":{},"add_headers":{}}`},
		},
		Refused: map[string]string{
			`{"remove_headers":[""]}`:                "config.remove_headers[0]",
			`{"add_headers":{"X":"\r"}}`:             "config.add_headers.X",
			`{"remove_query":["a"]}`:                 "config.remove_query",
			`{"rename_headers":{"a":""}}`:            "config.rename_headers.a",
			`{"set_headers":{"X-Env":"{env.PATH}"}}`: "config.set_headers.X-Env",
			`{"add_headers":{"X":"a{file./x}"}}`:     "config.add_headers.X",
		},
		Caddyfile: [][2]string{
			{"gateway_response_transform {\n remove_headers Server\n rename_headers X-A X-B\n add_headers X-C c\n}",
				`{"handler":"gateway_response_transform","remove_headers":["Server"],"rename_headers":{"X-A":"X-B"},"set_headers":{},"add_headers":{"X-C":"c"}}`},
		},
	},
	{
		Type: "response-body-transform",
		Normalized: [][2]string{
			{`{}`,
				`{"replace":[],"json_remove":[],"json_set":{},"content_types":["application/json","text/html","text/plain"],"max_body_bytes":1048576}`},
			{`{"replace":[{"pattern":"a+"}],"json_set":{"a.b":{"c":[1,2]}}}`,
				`{"replace":[{"pattern":"a+","with":""}],"json_remove":[],"json_set":{"a.b":{"c":[1,2]}},"content_types":["application/json","text/html","text/plain"],"max_body_bytes":1048576}`},
		},
		Refused: map[string]string{
			`{"replace":[{"pattern":"a("}]}`:             "config.replace[0].pattern",
			`{"replace":[{"pattern":"a"},{"with":"x"}]}`: "config.replace[1].pattern",
			`{"replace":[{"pattern":"(?=x)"}]}`:          "config.replace[0].pattern", // lookahead: not RE2
			`{"replace":{"pattern":"a"}}`:                "config.replace",
			`{"json_remove":["a..b"]}`:                   "config.json_remove[0]",
			`{"json_set":{".a":1}}`:                      "config.json_set..a",
			`{"content_types":["html"]}`:                 "config.content_types[0]",
			`{"max_body_bytes":0}`:                       "config.max_body_bytes",
			`{"json_patch":[]}`:                          "config.json_patch",
			`{"replace":[{"pattern":"a","flags":"i"}]}`:  "config.replace[0].flags", // no unknown field in a replace rule
		},
		Caddyfile: [][2]string{
			{"gateway_response_body_transform {\n replace \"a(b)\" \"$1\"\n replace x\n json_remove a.b c\n json_set meta.n 5\n json_set meta.s hello\n content_types text/*\n}",
				`{"handler":"gateway_response_body_transform","replace":[{"pattern":"a(b)","with":"$1"},{"pattern":"x","with":""}],"json_remove":["a.b","c"],"json_set":{"meta.n":5,"meta.s":"hello"},"content_types":["text/*"],"max_body_bytes":1048576}`},
		},
		BadCaddyfile: []string{
			"gateway_response_body_transform {\n replace a b c\n}",
		},
	},
	{
		Type: "response-compression",
		Normalized: [][2]string{
			{`{}`,
				`{"encodings":["zstd","gzip"],"min_length":512,"content_types":[]}`},
			{`{"encodings":["gzip"],"min_length":0,"content_types":["text/*","application/json"]}`,
				`{"encodings":["gzip"],"min_length":0,"content_types":["text/*","application/json"]}`},
		},
		Refused: map[string]string{
			`{"encodings":[]}`:                               "config.encodings",
			`{"encodings":["br"]}`:                           "config.encodings[0]",
			`{"encodings":["gzip","gzip"]}`:                  "config.encodings[1]",
			`{"min_length":-1}`:                              "config.min_length",
			`{"content_types":["json"]}`:                     "config.content_types[0]",
			`{"content_types":["*/*"]}`:                      "config.content_types[0]",
			`{"content_types":["text/html; charset=utf-8"]}`: "config.content_types[0]",
			`{"level":5}`:                                    "config.level",
		},
		Caddyfile: [][2]string{
			{"gateway_response_compression {\n encodings gzip\n min_length 0\n content_types text/*\n}",
				`{"handler":"gateway_response_compression","encodings":["gzip"],"min_length":0,"content_types":["text/*"]}`},
		},
	},
	{
		Type: "hsts",
		Normalized: [][2]string{
			{`{}`,
				`{"max_age_s":31536000,"include_subdomains":false,"preload":false}`},
			{`{"max_age_s":0,"preload":true}`,
				`{"max_age_s":0,"include_subdomains":false,"preload":true}`},
		},
		Refused: map[string]string{
			`{"max_age_s":-5}`:             "config.max_age_s",
			`{"include_subdomains":"yes"}`: "config.include_subdomains",
			`{"max-age":1}`:                "config.max-age",
		},
		Caddyfile: [][2]string{
			{"gateway_hsts {\n include_subdomains\n preload true\n}",
				`{"handler":"gateway_hsts","max_age_s":31536000,"include_subdomains":true,"preload":true}`},
		},
	},
}

func TestConfigs(t *testing.T) {
	for _, c := range configs {
		t.Run(c.Type, c.Check)
	}
}
