package controlplane

import (
	"encoding/json"
)

// quietLogging keeps Caddy's own admin endpoint out of the default log:
// every configuration change is a caddy.Load, and Caddy logs the restart
// of its admin endpoint each time ("admin endpoint started", "stopped
// previous server"), which would drown the gateway's own lines. A default
// log that names its own include or exclude lists is the user's choice and
// stays as it is.
func quietLogging(base map[string]json.RawMessage) {
	var logging map[string]json.RawMessage
	if raw, ok := base["logging"]; ok && json.Unmarshal(raw, &logging) != nil {
		return
	}
	if logging == nil {
		logging = map[string]json.RawMessage{}
	}
	var logs map[string]map[string]json.RawMessage
	if raw, ok := logging["logs"]; ok && json.Unmarshal(raw, &logs) != nil {
		return
	}
	if logs == nil {
		logs = map[string]map[string]json.RawMessage{}
	}
	def := logs["default"]
	if def == nil {
		def = map[string]json.RawMessage{}
	}
	if _, ok := def["include"]; ok {
		return
	}
	if _, ok := def["exclude"]; ok {
		return
	}
	def["exclude"] = json.RawMessage(`["admin"]`)
	logs["default"] = def
	logging["logs"], _ = json.Marshal(logs)
	base["logging"], _ = json.Marshal(logging)
}
