package gwctx

import (
	"net/http"
	"testing"
)

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, "text/event-stream; charset=utf-8": true, "Text/Event-Stream;x=1": true,
		"text/event-stream ;x=1": true, "": false, "text/event-streams": false, "text/plain": false, "application/json": false,
	} {
		if got := IsEventStream(http.Header{"Content-Type": {ct}}); got != want {
			t.Errorf("%q: %v, want %v", ct, got, want)
		}
	}
}
