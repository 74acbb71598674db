"""Every script in examples/linalg/advanced runs to completion (GPU-only ones are GPU tests)."""

from example_runner import example_tests

test_there_are_examples, test_example_runs = example_tests("linalg", "advanced", minimum=6)
