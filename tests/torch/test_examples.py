"""Every script in examples/torch runs to completion (GPU-only ones are GPU tests)."""

import pytest

pytest.importorskip("torch")

from example_runner import example_tests

test_there_are_examples, test_example_runs = example_tests("torch", minimum=3)
