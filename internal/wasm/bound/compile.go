package bound

import (
	"errors"
	"fmt"
)

// CompileLimits bound the work of compiling a module, which the runtime's
// optimizing compiler does before anything runs. Its time per function
// grows with the square of the function's basic blocks (its SSA passes
// walk the dominator tree from every block; a br_table's labels each get a
// block) and with the blocks times the values live across them, so a
// small module of one huge function may take minutes to hours of one
// core. CheckCompile measures a function by its branches (block, loop,
// if, else, br, br_if and every br_table label) and its instructions.
type CompileLimits struct {
	// MaxFunctionBranches bounds the branches of one function.
	MaxFunctionBranches int64
	// MaxCost bounds the sum over the module's functions of
	// branches × (branches + instructions).
	MaxCost int64
}

// CompileCost is a module's measure under CompileLimits.
type CompileCost struct {
	// MaxBranches is the largest function's branch count and Function
	// its index (imports included).
	MaxBranches int64
	Function    uint32
	// Cost is the sum over functions of branches × (branches + instructions).
	Cost int64
}

// MeasureCompile decodes wasm and measures it. A module the decoder does
// not read (an instruction beyond WebAssembly 2.0, which the runtime does
// not enable either) is an error: its cost is unknown.
func MeasureCompile(wasm []byte) (CompileCost, error) {
	m, err := decode(wasm)
	if err != nil {
		return CompileCost{}, err
	}
	var c CompileCost
	nImp := uint32(len(m.imports))
	for d, f := range m.funcs {
		if f.branches > c.MaxBranches {
			c.MaxBranches, c.Function = f.branches, nImp+uint32(d)
		}
		// no overflow: both factors are below the module's size
		c.Cost += f.branches * (f.branches + f.instructions)
	}
	return c, nil
}

// CheckCompile refuses a module whose compilation may exceed the limits,
// before the runtime sees it; the error says which limit.
func CheckCompile(wasm []byte, l CompileLimits) error {
	c, err := MeasureCompile(wasm)
	switch {
	case errors.Is(err, errUnknown):
		return fmt.Errorf("the module's compile cost cannot be measured (instructions beyond WebAssembly 2.0 are not accepted): %w", err)
	case err != nil:
		return fmt.Errorf("invalid WebAssembly module: %w", err)
	}
	switch {
	case c.MaxBranches > l.MaxFunctionBranches:
		return fmt.Errorf("function %d has %d branches (blocks, loops, ifs, elses, br, br_if and br_table labels); the limit is %d per function (compile time grows with their square): split the function",
			c.Function, c.MaxBranches, l.MaxFunctionBranches)
	case c.Cost > l.MaxCost:
		return fmt.Errorf("the module's compile cost (the sum over its functions of branches × (branches + instructions)) is %d; the limit is %d: split large functions or make the module smaller",
			c.Cost, l.MaxCost)
	}
	return nil
}
