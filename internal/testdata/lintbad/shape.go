package lintbad

// pyramid nests four closures: one too many.
func pyramid(step func(func())) {
	step(func() {
		step(func() {
			step(func() {
				step(func() {})
			})
		})
	})
}

// staged nests three: allowed.
func staged(step func(func())) {
	step(func() {
		step(func() {
			step(func() {})
		})
	})
}

// long is over 30 lines and asserts nothing.
func long(xs []int) int {
	n := 0
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	return n
}

// longChecked is as long, and checks its precondition.
func longChecked(xs []int) int {
	if len(xs) == 0 {
		panic("lintbad: no xs")
	}
	n := 0
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	n += len(xs)
	return n
}
