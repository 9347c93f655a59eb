package main

// Chaos mode (SKIPPR_CHAOS_MODE=yes): the daemon becomes its own
// supervisor. It runs itself as a child SKIPPR_CHAOS_KILLS times, each
// child SIGKILLing itself at a seeded random moment of its ingest, then
// once more to the end: that last child ingests a little, shuts down
// gracefully — everything acked is committed and applied — and judges
// the lake against what the WAL says was acknowledged, printing a verdict
// (records acked, found once, duplicates, missing). Exit 0 only for a
// clean verdict.
//
// What was acknowledged is exact because the generator is replayable: a
// record is a pure function of its offset key and offset, and the
// committed offsets say how many records of each partition the host
// acked. So chaos mode runs the no-configuration pipeline (the generator
// into the Parquet folder) and refuses a pipeline file.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	envChaosMode  = "SKIPPR_CHAOS_MODE"  // yes | no (default)
	envChaosKills = "SKIPPR_CHAOS_KILLS" // kills before the judged run; default 5
	envChaosSeed  = "SKIPPR_CHAOS_SEED"  // the kills' seed; default from the clock
	// envChaosChild is set by the supervisor for its children:
	// "kill=DURATION" (die that long after ready) or "judge".
	envChaosChild = "SKIPPR_CHAOS_CHILD"

	chaosKillsDefault = 5
	chaosKillsMax     = 1000
	chaosKillMin      = 500 * time.Millisecond // after ready: ingest is under way
	chaosKillSpread   = 3 * time.Second
	chaosJudgeIngest  = 2 * time.Second // the judged run's own ingest before it stops
)

// chaosConfig is chaos mode as the environment sets it.
type chaosConfig struct {
	on    bool
	kills int
	seed  uint64
}

// parseChaos reads the chaos variables; errors name the variable.
func parseChaos(getenv func(string) string) (chaosConfig, error) {
	c := chaosConfig{kills: chaosKillsDefault, seed: uint64(time.Now().UnixNano())}
	switch v := strings.TrimSpace(getenv(envChaosMode)); v {
	case "yes":
		c.on = true
	case "", "no":
	default:
		return c, &configError{Var: envChaosMode, Value: v, Want: "yes or no"}
	}
	if v := strings.TrimSpace(getenv(envChaosKills)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > chaosKillsMax {
			return c, &configError{Var: envChaosKills, Value: v, Want: fmt.Sprintf("a whole number from 1 to %d", chaosKillsMax)}
		}
		c.kills = n
	}
	if v := strings.TrimSpace(getenv(envChaosSeed)); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, &configError{Var: envChaosSeed, Value: v, Want: "a whole number"}
		}
		c.seed = n
	}
	if c.on && getenv(envPipelineFile) != "" {
		return c, &configError{Var: envChaosMode, Value: "yes", Want: "no pipeline file (" + envPipelineFile + "): chaos mode judges the generator's records, which it can enumerate"}
	}
	return c, nil
}

// superviseChaos runs the children and returns the judged run's exit
// code (1 if a child died otherwise than planned).
func superviseChaos(ctx context.Context, c chaosConfig, stdout io.Writer, log *slog.Logger) int {
	self, err := os.Executable()
	if err != nil {
		log.Error("chaos mode: cannot find this program to run it again", "err", err)
		return 1
	}
	rng := rand.New(rand.NewPCG(c.seed, 0xc4a05))
	log.Info("chaos mode: the daemon will SIGKILL itself, then judge what it acknowledged", "kills", c.kills, "seed", c.seed)
	for i := range c.kills {
		after := chaosKillMin + time.Duration(rng.Int64N(int64(chaosKillSpread)))
		if err := runChild(ctx, self, fmt.Sprintf("kill=%s", after), stdout); !killedBySelf(err) {
			if ctx.Err() != nil {
				log.Info("chaos mode: stopped")
				return 0
			}
			log.Error("chaos mode: a child did not die by its own SIGKILL", "kill", i+1, "err", err)
			return 1
		}
		log.Info("chaos mode: killed", "kill", i+1, "of", c.kills, "after_ready", after)
	}
	err = runChild(ctx, self, "judge", stdout)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	}
	log.Error("chaos mode: the judged run failed", "err", err)
	return 1
}

// runChild runs one child with role and waits for it.
func runChild(ctx context.Context, self, role string, stdout io.Writer) error {
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envChaosChild+"="+role)
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Signal(syscall.SIGINT) })
	defer stop()
	return cmd.Wait()
}

// killedBySelf reports whether a child ended by SIGKILL.
func killedBySelf(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// chaosChild is a child's part: die after a while, or ingest a little
// and be judged.
type chaosChild struct {
	killAfter time.Duration // > 0: SIGKILL this long after ready
	judge     bool
}

func parseChaosChild(v string) (chaosChild, error) {
	if v == "" {
		return chaosChild{}, nil
	}
	if v == "judge" {
		return chaosChild{judge: true}, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(v, "kill="))
	if !strings.HasPrefix(v, "kill=") || err != nil || d <= 0 {
		return chaosChild{}, &configError{Var: envChaosChild, Value: v, Want: "kill=DURATION or judge (set by chaos mode itself)"}
	}
	return chaosChild{killAfter: d}, nil
}

// ready arms the child's part once the daemon is ready: a SIGKILL, or
// the end of the judged run's ingest (stop).
func (c chaosChild) ready(log *slog.Logger, stop func()) {
	switch {
	case c.killAfter > 0:
		time.AfterFunc(c.killAfter, func() {
			log.Info("chaos mode: SIGKILL now")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		})
	case c.judge:
		time.AfterFunc(chaosJudgeIngest, stop)
	}
}
