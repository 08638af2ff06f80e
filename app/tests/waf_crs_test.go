package tests

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/caddy-gateway/gateway/app/internal/testgw"
	"github.com/caddy-gateway/gateway/internal/records"
)

// The CRS's own regression tests (the go-ftw YAML files shipped in the
// coraza-coreruleset module, tests/) run through the gateway: one gateway,
// a global waf plugin in detect mode at paranoia level 4 (every rule of
// every level runs, as in the CRS's and Coraza's own runs) with
// inspect_response, an upstream that answers as httpbin does, and each
// test's expected rule ids checked in the request record's waf field
// (GET /api/v1/requests), found by the test's X-CRS-Test id.

// crsSettings are the CRS variables Coraza's own runs set for the tests
// (crs-setup's optional limits), as the plugin's directives.
const crsSettings = `SecAction "id:9900005,phase:1,nolog,pass,t:none,setvar:tx.crs_validate_utf8_encoding=1,setvar:tx.arg_name_length=100,setvar:tx.arg_length=400,setvar:tx.total_arg_length=64000,setvar:tx.max_num_args=255,setvar:tx.max_file_size=64100,setvar:tx.combined_file_sizes=65535"`

// crsExceptions (waf_crs_exceptions_test.go) are the tests that do not
// pass through the gateway, each with the reason (bench/README.md).

type ftwFile struct {
	RuleID int       `yaml:"rule_id"`
	Tests  []ftwTest `yaml:"tests"`
}

type ftwTest struct {
	TestID int        `yaml:"test_id"`
	Stages []ftwStage `yaml:"stages"`
}

type ftwStage struct {
	Input  ftwInput  `yaml:"input"`
	Output ftwOutput `yaml:"output"`
}

type ftwInput struct {
	Method              *string   `yaml:"method"`
	URI                 *string   `yaml:"uri"`
	Version             *string   `yaml:"version"`
	Headers             yaml.Node `yaml:"headers"`
	Data                *string   `yaml:"data"`
	EncodedRequest      string    `yaml:"encoded_request"`
	AutocompleteHeaders *bool     `yaml:"autocomplete_headers"`
}

type ftwOutput struct {
	Status      int  `yaml:"status"`
	ExpectError bool `yaml:"expect_error"`
	Log         struct {
		ExpectIDs    []int  `yaml:"expect_ids"`
		NoExpectIDs  []int  `yaml:"no_expect_ids"`
		MatchRegex   string `yaml:"match_regex"`
		NoMatchRegex string `yaml:"no_match_regex"`
	} `yaml:"log"`
}

// crsCase is one stage to send.
type crsCase struct {
	file, id string // rule file (directory), test id "942100-3" (stage: "-s2")
	raw      []byte
	out      ftwOutput
	status   int
	sendErr  error
}

// crsTestsDir is the tests directory of the coraza-coreruleset module the
// gateway is built with.
func crsTestsDir(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/corazawaf/coraza-coreruleset/v4").Output()
	if err != nil {
		t.Fatalf("locating the coraza-coreruleset module: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "tests")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the CRS regression tests: %v", err)
	}
	return dir
}

func loadCRSCases(t *testing.T) []*crsCase {
	dir := crsTestsDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if len(files) < 100 {
		t.Fatalf("%d CRS test files in %s", len(files), dir)
	}
	var cases []*crsCase
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ff ftwFile
		if err := yaml.Unmarshal(b, &ff); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ruleFile := filepath.Base(filepath.Dir(f))
		for _, tc := range ff.Tests {
			for si, st := range tc.Stages {
				id := fmt.Sprintf("%d-%d", ff.RuleID, tc.TestID)
				if len(tc.Stages) > 1 {
					id += "-s" + strconv.Itoa(si+1)
				}
				raw, err := ftwRequest(st.Input, id)
				if err != nil {
					t.Fatalf("%s %s: %v", f, id, err)
				}
				cases = append(cases, &crsCase{file: ruleFile, id: id, raw: raw, out: st.Output})
			}
		}
	}
	return cases
}

// ftwRequest is the raw request a go-ftw stage sends, with an X-CRS-Test
// header carrying id (the record's request_id).
func ftwRequest(in ftwInput, id string) ([]byte, error) {
	marker := "X-CRS-Test: " + id + "\r\n"
	if in.EncodedRequest != "" {
		raw, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(in.EncodedRequest, "\n", ""))
		if err != nil {
			return nil, err
		}
		i := bytes.Index(raw, []byte("\r\n"))
		if i < 0 {
			return append(raw, "\r\n"+marker...), nil
		}
		return slices.Concat(raw[:i+2], []byte(marker), raw[i+2:]), nil
	}
	method, uri, version := "GET", "/", "HTTP/1.1"
	if in.Method != nil {
		method = *in.Method
	}
	if in.URI != nil {
		uri = *in.URI
	}
	if in.Version != nil {
		version = *in.Version
	}
	var b bytes.Buffer
	b.WriteString(method + " " + uri)
	if version != "" {
		b.WriteString(" " + version)
	}
	b.WriteString("\r\n")
	var names []string
	hdr := func(k, v string) {
		names = append(names, strings.ToLower(k))
		b.WriteString(k + ": " + v + "\r\n")
	}
	switch in.Headers.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(in.Headers.Content); i += 2 {
			hdr(in.Headers.Content[i].Value, in.Headers.Content[i+1].Value)
		}
	case yaml.SequenceNode:
		for _, n := range in.Headers.Content {
			var kv struct{ Name, Value string }
			if err := n.Decode(&kv); err != nil {
				return nil, err
			}
			hdr(kv.Name, kv.Value)
		}
	}
	data := ""
	if in.Data != nil {
		data = *in.Data
	}
	if in.AutocompleteHeaders == nil || *in.AutocompleteHeaders {
		if !slices.Contains(names, "content-length") && data != "" && !slices.Contains(names, "transfer-encoding") {
			hdr("Content-Length", strconv.Itoa(len(data)))
		}
		if !slices.Contains(names, "connection") {
			hdr("Connection", "close")
		}
	}
	b.WriteString(marker)
	b.WriteString("\r\n")
	b.WriteString(data)
	return b.Bytes(), nil
}

// httpbin is the upstream: /anything echoes the body (url-decoded for a
// form), /base64/X answers X decoded, anything else "Hello!".
func httpbin(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		switch {
		case r.URL.Path == "/anything":
			if r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
				if s, err := url.QueryUnescape(string(body)); err == nil {
					body = []byte(s)
				}
			}
			_, _ = w.Write(body)
		case strings.HasPrefix(r.URL.Path, "/base64/"):
			d, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.URL.Path, "/base64/"))
			_, _ = w.Write(d)
		default:
			_, _ = io.WriteString(w, "Hello!")
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// sendRaw writes raw to the gateway's proxy listener and reads the status.
func sendRaw(addr string, raw []byte) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(raw); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// check says why the case failed ("" when it passed), given its record.
func (c *crsCase) check(rec *records.Record) string {
	o := c.out
	if o.ExpectError {
		if c.sendErr != nil || c.status >= 400 {
			return ""
		}
		return fmt.Sprintf("expected an error, got status %d", c.status)
	}
	if o.Status != 0 && c.status != o.Status {
		return fmt.Sprintf("status %d, want %d", c.status, o.Status)
	}
	matched := map[int]bool{}
	var log strings.Builder
	if rec != nil && rec.WAF != nil {
		for _, r := range rec.WAF.Rules {
			matched[r.ID] = true
			fmt.Fprintf(&log, "[id \"%d\"] [msg \"%s\"]\n", r.ID, r.Message)
		}
	}
	for _, id := range o.Log.ExpectIDs {
		if !matched[id] {
			if rec == nil {
				return fmt.Sprintf("rule %d expected, no request record (status %d, %v)", id, c.status, c.sendErr)
			}
			return fmt.Sprintf("rule %d expected, matched %v", id, sortedKeys(matched))
		}
	}
	for _, id := range o.Log.NoExpectIDs {
		if matched[id] {
			return fmt.Sprintf("rule %d matched, not expected", id)
		}
	}
	if o.Log.MatchRegex != "" {
		if re, err := regexp.Compile(o.Log.MatchRegex); err == nil && !re.MatchString(log.String()) {
			return fmt.Sprintf("log %q does not match %q", log.String(), o.Log.MatchRegex)
		}
	}
	if o.Log.NoMatchRegex != "" {
		if re, err := regexp.Compile(o.Log.NoMatchRegex); err == nil && re.MatchString(log.String()) {
			return fmt.Sprintf("log matches %q", o.Log.NoMatchRegex)
		}
	}
	return ""
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func TestWAFCoreRuleSetRegression(t *testing.T) {
	if testing.Short() {
		t.Skip("the CRS corpus (about 4,700 requests) is not short")
	}
	cases := loadCRSCases(t)
	g := testgw.Start(t, nil)
	svc := g.Service("httpbin", httpbin(t))
	g.Route("all", svc, testgw.Paths("/"))
	addPlugin(t, g, "request-id", "global", 0, map[string]any{"header_name": "X-CRS-Test", "trust_incoming": true, "echo_downstream": false})
	addPlugin(t, g, "waf", "global", 0, map[string]any{
		"mode": "detect", "paranoia_level": 4, "inspect_response": true, "directives": crsSettings,
		// the CRS's own default, which its tests expect
		"allowed_methods": []string{"GET", "HEAD", "POST", "OPTIONS"},
	})

	// Batches smaller than the 500 records GET /api/v1/requests keeps,
	// sent by a few connections at a time.
	const batch, workers = 400, 4
	var results []crsResult
	for start := 0; start < len(cases); start += batch {
		part := cases[start:min(start+batch, len(cases))]
		var wg sync.WaitGroup
		next := make(chan *crsCase)
		for range workers {
			wg.Go(func() {
				for c := range next {
					c.status, c.sendErr = sendRaw(g.ProxyAddr, c.raw)
				}
			})
		}
		for _, c := range part {
			next <- c
		}
		close(next)
		wg.Wait()
		var recs []*records.Record
		g.JSON("GET", "/api/v1/requests?limit=500", nil, &recs)
		byID := map[string]*records.Record{}
		for _, r := range recs {
			if r.RequestID != nil {
				byID[*r.RequestID] = r
			}
		}
		for _, c := range part {
			reason := c.check(byID[c.id])
			results = append(results, crsResult{c.file, c.id, reason})
		}
	}

	type tally struct{ pass, fail, excepted int }
	perFile := map[string]*tally{}
	var unexpected []string
	for _, r := range results {
		tl := perFile[r.file]
		if tl == nil {
			tl = &tally{}
			perFile[r.file] = tl
		}
		_, excepted := crsExceptions[r.id]
		switch {
		case r.reason == "":
			tl.pass++
			if excepted {
				t.Logf("%s passes but is listed as an exception", r.id)
			}
		case excepted:
			tl.excepted++
		default:
			tl.fail++
			unexpected = append(unexpected, r.id+": "+r.reason)
		}
	}
	var report strings.Builder
	report.WriteString("| rule file | tests | pass | listed exceptions | other failures | pass rate |\n|---|---:|---:|---:|---:|---:|\n")
	var total tally
	for _, f := range slices.Sorted(maps.Keys(perFile)) {
		tl := perFile[f]
		n := tl.pass + tl.fail + tl.excepted
		total.pass, total.fail, total.excepted = total.pass+tl.pass, total.fail+tl.fail, total.excepted+tl.excepted
		fmt.Fprintf(&report, "| %s | %d | %d | %d | %d | %.1f%% |\n", f, n, tl.pass, tl.excepted, tl.fail, 100*float64(tl.pass)/float64(n))
	}
	n := total.pass + total.fail + total.excepted
	fmt.Fprintf(&report, "| all | %d | %d | %d | %d | %.1f%% |\n", n, total.pass, total.excepted, total.fail, 100*float64(total.pass)/float64(n))
	t.Logf("CRS regression tests through the gateway:\n%s", report.String())
	if p := os.Getenv("WAF_CRS_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(report.String()+"\nfailures:\n"+strings.Join(unexpected, "\n")+"\n"), 0o644)
	}
	if len(unexpected) > 0 {
		t.Errorf("%d CRS tests failed that are not listed as exceptions:\n%s", len(unexpected), strings.Join(unexpected, "\n"))
	}
}

type crsResult struct{ file, id, reason string }
