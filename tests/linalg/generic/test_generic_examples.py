"""Every script in examples/linalg/generic runs to completion (GPU-only ones are GPU tests)."""

from example_runner import example_tests

test_there_are_examples, test_example_runs = example_tests("linalg", "generic", minimum=7)
