#!/usr/bin/env bash
# Renders the README's rack map: an example cluster's SVG (docs/pictures/rack-map.svg), then a
# PNG of it with headless Chromium (Debian package `chromium`; not part of CI).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python - <<'PY'
from pathlib import Path
from gangplace import GangRequest, synth

cluster, _ = synth.build("tiny", fill=0.5, seed=2)
cluster.reserve(GangRequest(2, 4))
cluster.set_gpu_health("s1-r3-n2", 5, False)
cluster.cordon("s0-r1-n3")
highlight = cluster.place_gang(GangRequest(4, 8))
svg = cluster.to_svg(highlight=highlight)
Path("docs/pictures/rack-map.svg").write_text(svg)
Path("out").mkdir(exist_ok=True)
Path("out/rack-map.html").write_text(f"<html><body style='margin:0;background:white'>{svg}</body></html>")
PY
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=760,260 \
    --screenshot="$PWD/docs/pictures/rack-map.png" "file://$PWD/out/rack-map.html" 2>/dev/null
echo "wrote docs/pictures/rack-map.svg and docs/pictures/rack-map.png"
