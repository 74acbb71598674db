"""The environment report of ``python -m nvmath``."""

from __future__ import annotations

from nvmath._diagnostics import report


def test_missing_package_reported_not_raised():
    """An absent distribution is reported as 'not installed'."""
    assert report.package_version("surely-not-a-real-distribution-xyz") == "not installed"


def test_report_names_versions_driver_and_libraries():
    """The report lists nvmath, cuda-core, the driver line and every CUDA math library."""
    text = "\n".join(report.report_lines())
    for needle in ("nvmath", "cuda-core", "cuda-bindings", "cuda-pathfinder", "CUDA driver:", "numpy"):
        assert needle in text
    for lib in report.LIBRARIES:
        assert f"  {lib}" in text


def test_driver_probe_never_raises():
    """Probing the driver returns a version string and a device list even without a GPU."""
    version, devices = report.driver_and_devices()
    assert isinstance(version, str) and isinstance(devices, list)


def test_source_commit_of_a_checkout_and_of_a_plain_folder(tmp_path):
    """A git checkout reports its commit (12 hex digits, maybe +dirty); a plain folder reports None."""
    import nvmath

    assert report.source_commit(str(tmp_path)) is None
    location = nvmath.__file__.rsplit("/", 2)[0]
    commit = report.source_commit(location)
    if commit is not None:  # a checkout with git available
        assert len(commit.removesuffix("+dirty")) == 12
        assert commit in "\n".join(report.report_lines())


def test_report_says_which_call_path_is_active_and_why():
    """The 'call path' line and the JSON's call_path give the fast-path selection (compiled or pure, why)."""
    from nvmath._internal import fastpath

    data = report.collect()
    assert data["call_path"] == {"compiled": fastpath.available(), "detail": fastpath.describe()}
    text = "\n".join(report.format_report(data))
    assert f"  call path  {fastpath.describe()}" in text
    expected = "compiled (nvmath._fastcall" if fastpath.available() else "pure Python ("
    assert data["call_path"]["detail"].startswith(expected)
