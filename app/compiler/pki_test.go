package compiler

import (
	"encoding/json"
	"testing"
)

// The compiled pki app turns trust installation off for every CA: the
// default local one and the base config's own.
func TestCompilePKIAppNeverInstallsTrust(t *testing.T) {
	apps := map[string]json.RawMessage{
		"pki": json.RawMessage(`{"certificate_authorities":{"mine":{"name":"Mine","install_trust":true},"other":{}}}`),
	}
	if err := mergePKIApp(apps); err != nil {
		t.Fatal(err)
	}
	var pki struct {
		CAs map[string]map[string]any `json:"certificate_authorities"`
	}
	if err := json.Unmarshal(apps["pki"], &pki); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"local", "mine", "other"} {
		if ca, ok := pki.CAs[id]; !ok || ca["install_trust"] != false {
			t.Errorf("CA %s: %v", id, pki.CAs)
		}
	}
	if pki.CAs["mine"]["name"] != "Mine" {
		t.Errorf("the base CA's settings were lost: %v", pki.CAs["mine"])
	}
}
