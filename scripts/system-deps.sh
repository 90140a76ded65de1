#!/usr/bin/env bash
# System packages dlmeval's demo and tests use: WordNet 3.0 (METEOR), Perl's XML::Parser (ROUGE-1.5.5, the
# `--rouge-impl rouge155` of meta-eval; Debian's perl has DB_File, the other module it needs), Chromium (the report's
# PDF/screenshot tests), bubblewrap (the sandbox that runs generated HumanEval code; without it dlmeval refuses to run
# such code unless --sandbox-unsafe) and libseccomp2 (the library behind the sandbox's seccomp filter, through
# pyseccomp). Installs what is missing with apt-get when it can (root, or sudo without a password); otherwise it says
# what is missing and exits 0, so the caller runs on and the features that need the packages report themselves as
# unavailable. Under CI (CI=1 or CI=true) a package that is still missing is a failure (exit 1), not a skip.
# Used by `make demo`, `make test` and .ci/run.
set -uo pipefail
has_libseccomp() { /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || ls /usr/lib/*/libseccomp.so.2 /lib/*/libseccomp.so.2 >/dev/null 2>&1; }
find_missing() {  # the Debian packages still missing, in need[]
  need=()
  [ -f "${DLMEVAL_WORDNET:-/usr/share/wordnet}/data.noun" ] || need+=(wordnet-base)
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  has_libseccomp || need+=(libseccomp2)
  command -v perl >/dev/null 2>&1 && perl -MXML::Parser -MDB_File -e 1 >/dev/null 2>&1 || need+=(perl libxml-parser-perl)
}
find_missing
[ ${#need[@]} -eq 0 ] && exit 0
ci=0
case "${CI:-}" in 1|true|TRUE|True|yes) ci=1 ;; esac
if [ "${DLMEVAL_NO_SYSTEM_DEPS:-0}" = 1 ]; then
  echo "system-deps: missing ${need[*]} (DLMEVAL_NO_SYSTEM_DEPS=1: not installing)" >&2
  exit "$ci"
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo=(sudo -n); else sudo=(false); fi
fi
if command -v apt-get >/dev/null 2>&1 && [ "${sudo[*]}" != false ]; then
  echo "system-deps: installing ${need[*]} with apt-get" >&2
  ("${sudo[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq \
    --no-install-recommends "${need[@]}") >/dev/null 2>&1
  find_missing  # what the installation did not bring (apt-get may succeed and leave a command off the PATH)
  [ ${#need[@]} -eq 0 ] && exit 0
fi
if [ "$ci" = 1 ]; then
  echo "error: system packages missing: ${need[*]} (scripts/system-deps.sh installs them with apt-get as root or" \
    "passwordless sudo); under CI (CI=$CI) the tests that need them fail instead of skipping, so this stops here" >&2
  exit 1
fi
echo "warning: could not install ${need[*]} (needs apt-get as root); METEOR, ROUGE-1.5.5, the report's" \
  "browser features and the HumanEval sandbox will say they are not available" >&2
exit 0
