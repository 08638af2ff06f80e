package gwctx

import "testing"

func TestGRPCCode(t *testing.T) {
	for status, want := range map[int]int{401: 16, 403: 7, 404: 12, 429: 8, 413: 8, 502: 14, 503: 14, 504: 4, 500: 13, 508: 13, 499: 1, 418: 2} {
		if got := GRPCCode(status); got != want {
			t.Errorf("%d: %d, want %d", status, got, want)
		}
	}
	if got := EncodeGRPCMessage("50% ü\n"); got != "50%25 %C3%BC%0A" {
		t.Errorf("encoded %q", got)
	}
	for ct, want := range map[string]bool{"application/grpc": true, "application/grpc+proto": true, "application/grpc-web-text": true,
		"application/GRPC; charset=x": true, "application/grpcx": false, "application/json": false, "": false} {
		if IsGRPCContentType(ct) != want {
			t.Errorf("%q: %v", ct, !want)
		}
	}
}
