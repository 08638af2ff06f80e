package waf

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/caddy-gateway/gateway/schema"
)

// allowedDirectives are the SecLang directives a config's directives may
// use (lower case): rules and their tuning. Everything else is refused,
// whether it reads or writes files or reaches the network (Include,
// SecAuditLog*, SecDebugLog*, SecRemoteRules, SecDataDir, SecUploadDir …)
// or sets what the plugin's own fields own (SecRuleEngine, the body
// limits and body access): an allow-list, so a directive added to a later
// Coraza is refused until it is looked at.
var allowedDirectives = map[string]bool{
	"secrule":                  true,
	"secaction":                true,
	"secmarker":                true,
	"secdefaultaction":         true,
	"secruleremovebyid":        true,
	"secruleremovebytag":       true,
	"secruleremovebymsg":       true,
	"secruleupdatetargetbyid":  true,
	"secruleupdatetargetbytag": true,
	"secruleupdatetargetbymsg": true,
	"secruleupdateactionbyid":  true,
	"seccomponentsignature":    true,
	"secargumentseparator":     true,
	"secwebappid":              true,
}

// ownedDirectives are set by the plugin's fields: named in the error.
var ownedDirectives = map[string]string{
	"secruleengine":               "mode",
	"secrequestbodyaccess":        "request_body_limit",
	"secrequestbodylimit":         "request_body_limit",
	"secrequestbodyinmemorylimit": "request_body_limit",
	"secrequestbodylimitaction":   "body_limit_action",
	"secrequestbodynofileslimit":  "request_body_limit",
	"secresponsebodyaccess":       "inspect_response",
	"secresponsebodylimit":        "request_body_limit",
	"secresponsebodylimitaction":  "request_body_limit",
	"secresponsebodymimetype":     "inspect_response",
}

// forbiddenInRule are operators that read files or reach the network, and
// actions that reach outside the transaction (setenv changes the
// gateway's own environment).
var forbiddenInRule = regexp.MustCompile(`(?i)(?:^|[\s"'!,])(@(?:pmFromFile|pmf|ipMatchFromFile|ipMatchF|inspectFile|rbl|geoLookup|gsbLookup|validateDTD|validateSchema)|(?:setenv|exec|ctl:auditLog\w*|ctl:debugLog\w*)\b)`)

// checkDirectives refuses directives outside the allow-list, naming the
// directive and its line.
func checkDirectives(text string) error {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := strings.TrimRight(lines[i], "\r")
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimRight(lines[i], "\r")
		}
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, _, _ := strings.Cut(strings.Join(strings.Fields(t), " "), " ")
		at := "line " + strconv.Itoa(start) + ": "
		lower := strings.ToLower(name)
		if field, ok := ownedDirectives[lower]; ok {
			return schema.Errorf("directives", "%sdirective %s is not allowed: the plugin's %s sets it", at, name, field)
		}
		if !allowedDirectives[lower] {
			return schema.Errorf("directives", "%sdirective %s is not allowed: the rule set is the embedded CRS, and directives may not read or write files or reach the network (allowed: SecRule, SecAction, SecMarker, SecDefaultAction, SecRuleRemoveBy*, SecRuleUpdateTargetBy*, SecRuleUpdateActionById, SecComponentSignature, SecArgumentSeparator, SecWebAppId)", at, name)
		}
		if m := forbiddenInRule.FindStringSubmatch(t); m != nil {
			return schema.Errorf("directives", "%s%s uses %s, which is not allowed: directives may not read or write files, reach the network or change the process", at, name, m[1])
		}
	}
	return nil
}
