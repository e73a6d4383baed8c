import pytest

# The shared checks in harness.py assert: show their values on failure like a test's own.
pytest.register_assert_rewrite("tests.frameworks.harness")
