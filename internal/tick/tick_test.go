package tick

import (
	"context"
	"testing"
	"time"
)

// fn runs once per kick (the interval is too long to matter) and Every
// returns when its context ends.
func TestEveryKickedAndStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	kick, ran, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		Every(ctx, time.Hour, kick, func() { ran <- struct{}{} })
		close(done)
	}()
	for i := 0; i < 3; i++ {
		kick <- struct{}{}
		<-ran
	}
	cancel()
	<-done
}
