#!/usr/bin/env bash
# A built site in headless Chromium (Debian's `chromium` package): screenshots of the index, a run page and the
# claims page, and each page's console errors, sideways scrolling and shrunk figures (scripts/check_site.py).
#     scripts/check_site.sh [SITE] [OUT]     # SITE: report/site (`minimult report --site report/site`); OUT: SITE-check
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${here}/.venv/bin/python"
[ -x "${python}" ] || python=python3  # the checker needs only the standard library
exec "${python}" "${here}/scripts/check_site.py" "$@"
