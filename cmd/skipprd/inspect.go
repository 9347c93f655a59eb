package main

import "fmt"

const inspectAbout = `Reads a pipeline's WAL without starting it (not yet built).`

func inspectCommand(c *invocation) int {
	fmt.Fprintln(c.stderr, "skipprd inspect: not built yet")
	return exitFail
}
