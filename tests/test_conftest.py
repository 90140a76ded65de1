"""tests/conftest.py's CI rule: under CI (.ci/run sets CI=1) a test skipped because a package that `make test`
installs is missing (a system package of scripts/system-deps.sh, or lm-eval) fails instead, with the skip's reason;
other skips stay skips."""

from __future__ import annotations

import pytest

from tests.conftest import promised_package_failure

GENERATED = """
import pytest

def test_needs_chromium():
    pytest.skip("chromium is not installed (scripts/system-deps.sh installs it)")

@pytest.mark.skipif(True, reason="no OS isolation on this machine: the bubblewrap sandbox lacks bwrap")
def test_needs_bubblewrap():
    pass

@pytest.mark.skipif(True, reason="WordNet missing: apt-get install -y wordnet-base (CI installs it)")
def test_needs_wordnet():
    pass

def test_needs_shared_data():
    pytest.skip("the paper 2501 is not under ../shared/papers")

def test_passes():
    pass
"""


@pytest.mark.parametrize(
    "reason",
    [
        "no OS isolation here: the bubblewrap sandbox lacks user namespaces",
        "needs Debian's wordnet-base",
        "chromium is not installed (apt-get install -y --no-install-recommends chromium)",
        "perl module XML::Parser is missing (apt-get install libxml-parser-perl; scripts/system-deps.sh does it)",
        "no perl on PATH (apt-get install perl)",
        "could not import 'lm_eval': No module named 'lm_eval'",
    ],
)
def test_a_system_package_skip_fails_only_under_ci(reason):
    for ci in ("1", "true"):
        assert reason in promised_package_failure(reason, {"CI": ci})
    for env in ({}, {"CI": ""}, {"CI": "0"}):
        assert promised_package_failure(reason, env) is None


def test_other_skips_stay_skips_under_ci():
    assert promised_package_failure("could not import 'mauve': No module named 'mauve'", {"CI": "1"}) is None
    assert promised_package_failure("the shared data directory has no ARC file", {"CI": "1"}) is None


def test_the_hook_turns_the_skips_into_failures_under_ci(pytester, monkeypatch):
    pytester.makeconftest(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
    )
    pytester.makepyfile(test_generated=GENERATED)
    monkeypatch.setenv("CI", "1")
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rfE")
    res.assert_outcomes(passed=1, skipped=1, failed=1, errors=2)  # a skipif mark fails in setup: an error
    res.stdout.fnmatch_lines(["*under CI a missing package that make test installs fails*chromium*"])
    monkeypatch.setenv("CI", "")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1, skipped=4)


def test_a_module_skipped_whole_is_a_collection_error_under_ci(pytester, monkeypatch):
    pytester.makeconftest(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
    )
    pytester.makepyfile(
        test_module="import pytest\npytest.skip('chromium is not installed', allow_module_level=True)\n"
    )
    monkeypatch.setenv("CI", "1")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(errors=1)
    monkeypatch.setenv("CI", "")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(skipped=1)
