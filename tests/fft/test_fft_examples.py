"""Every script in examples/fft runs to completion (GPU-only ones are GPU tests; exit 77 = skip)."""

from example_runner import example_tests

test_there_are_examples, test_example_runs = example_tests("fft", minimum=6)
