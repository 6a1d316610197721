#!/usr/bin/env bash
# Renders the rack maps of the README and docs/pictures.md: SVGs of three clusters
# (docs/pictures/*.svg), then PNGs of them with headless Chromium (Debian package `chromium`; not part of CI):
#   tour          the README's tour: two racks after one Scheduler cycle, train outlined
#   tiny          256 GPUs, every GPU a cell, a placement outlined
#   superpod      16,384 GPUs (2,048 nodes): one cell per rack
#   colossus100k  102,400 GPUs (12,800 nodes): one cell per rack, a 128-GPU gang outlined
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
mkdir -p out docs/pictures
python - <<'PY'
import re
from pathlib import Path

from gangplace import GangRequest, synth

def write(name: str, svg: str) -> None:
    Path(f"docs/pictures/{name}.svg").write_text(svg)
    width, height = (int(v) for v in re.search(r'width="(\d+)" height="(\d+)"', svg).groups())
    Path(f"out/{name}.html").write_text(
        f"<html><body style='margin:0;background:white'>{svg}</body></html>"
    )
    Path(f"out/{name}.size").write_text(f"{width + 8},{height + 8}")

from gangplace import Cluster, Scheduler

cluster = Cluster(("spine", "rack"))  # the README's tour, as far as its picture
for rack in ("r1", "r2"):
    for n in range(4):
        cluster.add_node(f"{rack}-n{n}", gpus=8, topology={"spine": "s1", "rack": rack})
cluster.set_gpu_health("r1-n0", 5, False)
scheduler = Scheduler(cluster, clock=lambda: 0.0)
scheduler.submit("train", GangRequest(6, 8), walltime=3600)
scheduler.submit("tune", GangRequest(2, 8), walltime=600)
scheduler.submit("eval", GangRequest(1, 8), walltime=600)
decisions = scheduler.cycle()
write("tour", cluster.to_svg(highlight=decisions.started[0].allocation.placement))

tiny, _ = synth.build("tiny", fill=0.5, seed=2)
tiny.reserve(GangRequest(2, 4))
tiny.set_gpu_health("s1-r3-n2", 5, False)
tiny.cordon("s0-r1-n3")
write("rack-map", tiny.to_svg(highlight=tiny.place_gang(GangRequest(4, 8))))

superpod, _ = synth.build("superpod", fill=0.7, seed=3)
write("superpod", superpod.to_svg())

colossus, _ = synth.build("colossus100k", fill=0.8, seed=4)
for name in colossus.nodes()[:64]:
    colossus.cordon(name)
write("colossus100k", colossus.to_svg(highlight=colossus.place_gang(GangRequest(16, 8))))
PY
for name in tour rack-map superpod colossus100k; do
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size="$(cat "out/$name.size")" \
        --screenshot="$PWD/docs/pictures/$name.png" "file://$PWD/out/$name.html" 2>/dev/null
    echo "wrote docs/pictures/$name.svg and docs/pictures/$name.png"
done
