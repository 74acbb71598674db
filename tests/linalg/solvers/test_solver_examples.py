"""Every script in examples/linalg/solvers runs to completion (GPU ones are GPU tests; exit 77 = skip)."""

from example_runner import example_tests

test_there_are_examples, test_solver_example_runs = example_tests("linalg", "solvers", minimum=5)
