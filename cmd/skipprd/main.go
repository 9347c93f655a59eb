package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	log := newLogger(os.Getenv(envLogFormat), os.Stderr)
	ctx, stop := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-signals
		log.Info("signal received: shutting down gracefully", "signal", s.String())
		stop()
		s = <-signals
		log.Warn("second signal: exiting without a graceful shutdown; the next start recovers from the WAL", "signal", s.String())
		code := 1
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
	os.Exit(cli(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}
