# Headless Chromium for the report tests (sourced): render a page, then
# check its screenshot shows the curves and the plan picture.
#
#   need_browser                 exits 77 (skip) without chromium or python3-pil
#   browse PAGE ARGS…            chromium on file://PAGE (an absolute path) with ARGS
#   screenshot_shows_report PNG  the page's colours where report_page.cc draws them
#
# Callers define fail() and run in their work folder.

need_browser() {
  chromium=$(command -v chromium || true)
  if [ -z "$chromium" ] || ! /usr/bin/python3 -c 'import PIL' 2>/dev/null; then
    echo "SKIP: the page's checks passed, but rendering needs chromium and python3-pil (bash scripts/setup.sh installs them)"
    exit 77
  fi
}

browse() {
  local page=$1; shift
  timeout 120 "$chromium" --headless --no-sandbox --disable-dev-shm-usage --disable-gpu --hide-scrollbars \
    --user-data-dir="$PWD/chromium-profile" "$@" "file://$page" 2>>chromium.err
}

screenshot_shows_report() {
  /usr/bin/python3 - "$1" <<'PY'
import sys
from PIL import Image
img = Image.open(sys.argv[1]).convert("RGB")
w, h = img.size
px = img.load()
def near(c, want, tol=40):
    return all(abs(a - b) <= tol for a, b in zip(c, want))
# Colours the page draws with: curves and all-reduce segments (blue), eval
# dots (orange), memory bars (red), rank boxes (pale blue).
counts = {"curve blue": 0, "eval orange": 0, "memory red": 0, "rank boxes": 0}
rows = {k: [] for k in counts}
want = {"curve blue": (59, 117, 175), "eval orange": (225, 129, 44), "memory red": (196, 78, 82), "rank boxes": (232, 238, 247)}
for y in range(0, h, 2):
    for x in range(0, w, 2):
        c = px[x, y]
        for k, v in want.items():
            if near(c, v, 8 if k == "rank boxes" else 40):
                counts[k] += 1
                rows[k].append(y)
print("screenshot %dx%d, pixels (every 2nd row and column): %s" % (w, h, counts))
ok = counts["curve blue"] > 300 and counts["eval orange"] > 20 and counts["memory red"] > 300 and counts["rank boxes"] > 100
# The curves come before the plan: blue appears above the first memory bar.
ok = ok and min(rows["curve blue"]) < min(rows["memory red"])
sys.exit(0 if ok else 1)
PY
}
