#!/usr/bin/env python3
"""Turns bench/wall.sh's measurements into bench/results.md and bench/launch-ratios.svg.

    report.py OUT BENCH_DIR

OUT holds <mode>/<job>-<round>[-bwrap].json (hyperfine exports: wall clock),
<mode>/<job>.cpu.tsv (bench/cpu-runs.c: CPU time and page faults per run), rss.txt,
callgrind.txt and meta.txt. Exits 1 if the callgrind count is more than the allowed factor
above bench/callgrind-baseline.txt (after writing the results). Standard library only.
"""
import json
import os
import statistics
import sys
from glob import glob

MODES = [("root", "root"), ("user", "unprivileged")]
COMMANDS = ["direct", "shim", "shim@tty", "shim@cold", "run", "minimal", "minimal-sc", "minimal-same", "bwrap", "shim-dyn"]
LABELS = {
    "direct": "direct",
    "shim": "landwall shim (`claude`)",
    "shim@tty": "landwall shim on a terminal (terminal filter) †",
    "shim@cold": "landwall shim without `$XDG_RUNTIME_DIR` (no link cache) †",
    "run": "`landwall run`",
    "minimal": "minimal Landlock sandboxer (C)",
    "minimal-sc": "minimal sandboxer + landwall's seccomp filter",
    "minimal-same": "minimal sandboxer with landwall's own rules",
    "bwrap": "bubblewrap",
    "shim-dyn": "landwall shim, dynamic build",
}
JOBS = [
    ("find", "`find /usr -type f`"),
    ("grep", "`grep -r` over 20k files"),
    ("git", "`git status`, 20k-file repo"),
]
med = statistics.median


def wall(out, mode, job):
    """Wall-clock samples per command, in ms, over every round."""
    times = {}
    for path in sorted(glob(os.path.join(out, mode, f"{job}-*.json"))):
        with open(path) as f:
            for r in json.load(f)["results"]:
                times.setdefault(r["command"], []).extend(t * 1000 for t in r["times"])
    return times


def cpu(out, mode, job):
    """CPU ms, minor faults and wall ms per command, from cpu-runs."""
    runs = {}
    path = os.path.join(out, mode, f"{job}.cpu.tsv")
    if os.path.exists(path):
        for line in open(path):
            name, c, w, flt = line.split("\t")
            runs.setdefault(name, ([], [], []))
            runs[name][0].append(float(c))
            runs[name][1].append(int(flt))
            runs[name][2].append(float(w))
    return runs


def ms(x):
    return f"{x:.2f} ms" if x < 100 else f"{x:.0f} ms"


def rng(v):
    return f"{min(v):.2f} – {max(v):.2f}" if max(v) < 100 else f"{min(v):.0f} – {max(v):.0f}"


def launch_table(out, mode, job):
    w, c = wall(out, mode, job), cpu(out, mode, job)
    base_w, base_c = med(w["direct"]), med(c["direct"][0])
    rows = [
        "| command | wall, median | min – max (ms) | × direct | CPU, median | × direct | page faults |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in COMMANDS:
        if name not in w and name not in c:
            continue
        cells = "– | – | –"
        if name in c:
            mc = med(c[name][0])
            cells = f"{mc:.3f} ms | {mc / base_c:.2f}× | {med(c[name][1]):.0f}"
        if name in w:
            mw = med(w[name])
            rows.append(f"| {LABELS[name]} | {ms(mw)} | {rng(w[name])} | **{mw / base_w:.2f}×** | {cells} |")
        else:
            # Runs that only cpu-runs can make (on a terminal): its wall clock, against the
            # direct runs of the same cpu-runs call.
            cw, base_cw = c[name][2], med(c["direct"][2])
            rows.append(f"| {LABELS[name]} | {ms(med(cw))} | {rng(cw)} | **{med(cw) / base_cw:.2f}×** | {cells} |")
    return rows


def fs_table(out, mode):
    rows = [
        "| job | command | wall, median | × direct | CPU, median | × direct | × minimal | × minimal + seccomp |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    worst = {"minimal": 0.0, "minimal-sc": 0.0}
    for job, title in JOBS:
        w, c = wall(out, mode, job), cpu(out, mode, job)
        if not w:
            continue
        base_w, base_c = med(w["direct"]), med(c["direct"][0])
        mini, mini_sc = med(c["minimal"][0]), med(c["minimal-sc"][0])
        for name in ["direct", "minimal", "minimal-sc", "shim", "run", "bwrap"]:
            mw, mc = med(w[name]), med(c[name][0])
            bold = "**" if name in ("shim", "run") else ""
            if name in ("shim", "run"):
                worst["minimal"] = max(worst["minimal"], mc / mini)
                worst["minimal-sc"] = max(worst["minimal-sc"], mc / mini_sc)
            rows.append(
                f"| {title} | {LABELS[name]} | {ms(mw)} | {mw / base_w:.3f}× | {ms(mc)} | "
                f"{mc / base_c:.3f}× | {bold}{mc / mini:.3f}×{bold} | {bold}{mc / mini_sc:.3f}×{bold} |"
            )
    return rows, worst


def ratio(out, mode, job, name):
    t = wall(out, mode, job)
    return med(t[name]) / med(t["direct"])


def cpu_ratio(out, mode, job, name):
    c = cpu(out, mode, job)
    return med(c[name][0]) / med(c["direct"][0])


def cpu_wall_ratio(out, mode, job, name):
    """Wall clock from cpu-runs, for runs hyperfine cannot make (on a terminal)."""
    c = cpu(out, mode, job)
    return med(c[name][2]) / med(c["direct"][2])


def chart(out, path):
    """Horizontal bars: launch of /bin/true as a multiple of running it directly."""
    bars = []
    for name in ["shim", "run", "minimal", "minimal-same", "minimal-sc", "bwrap", "shim-dyn"]:
        row = [(m, ratio(out, m, "launch", name)) for m, _ in MODES if name in wall(out, m, "launch")]
        if row:
            bars.append((LABELS[name].replace("`", ""), row))
    bars.append(("landwall shim, 500 extra rules", [(m, ratio(out, m, "rules500", "shim")) for m, _ in MODES]))
    bars.append(("minimal sandboxer, 500 extra rules", [(m, ratio(out, m, "rules500", "minimal")) for m, _ in MODES]))
    bars.append(("… with landwall's own rules", [(m, ratio(out, m, "rules500", "minimal-same")) for m, _ in MODES]))
    top = max(r for _, row in bars for _, r in row)
    scale_max = float(max(8, min(int(top) + 1, 20)))
    left, width, bar_h, gap = 300, 460, 13, 10
    height = 70 + len(bars) * (2 * bar_h + gap) + 30
    x = lambda v: left + min(v, scale_max) / scale_max * width
    colors = {"root": "#c0392b", "user": "#2e86c1"}
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 70}" height="{height}" font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        '<text x="10" y="20" font-size="14" font-weight="bold">Launch of /bin/true, as a multiple of running it directly</text>',
        '<text x="10" y="38" fill="#555">median wall clock, every column measured in the same run (bench/results.md)</text>',
    ]
    y0 = 52
    for v in range(0, int(scale_max) + 1):
        svg.append(f'<line x1="{x(v):.1f}" y1="{y0}" x2="{x(v):.1f}" y2="{height - 32}" stroke="#eee"/>')
        svg.append(f'<text x="{x(v):.1f}" y="{height - 18}" text-anchor="middle" fill="#555">{v}×</text>')
    for v, dash in ((2.0, "6,3"), (1.8, "2,3")):
        svg.append(f'<line x1="{x(v):.1f}" y1="{y0 - 4}" x2="{x(v):.1f}" y2="{height - 32}" stroke="#27ae60" stroke-width="1.5" stroke-dasharray="{dash}"/>')
    svg.append(f'<text x="{x(2.0) + 4:.1f}" y="{y0 + 2}" fill="#27ae60">target 2.0× (stretch 1.8×)</text>')
    y = y0 + 10
    for label, row in bars:
        svg.append(f'<text x="{left - 8}" y="{y + bar_h + gap / 4:.1f}" text-anchor="end">{label}</text>')
        for mode, r in row:
            svg.append(f'<rect x="{left}" y="{y}" width="{x(r) - left:.1f}" height="{bar_h}" fill="{colors[mode]}"/>')
            more = "" if r <= scale_max else " →"
            svg.append(f'<text x="{x(r) + 4:.1f}" y="{y + bar_h - 2}" fill="#333">{r:.2f}×{more}</text>')
            y += bar_h
        y += gap
    ly = height - 6
    svg.append(f'<rect x="{left}" y="{ly - 9}" width="10" height="10" fill="{colors["root"]}"/><text x="{left + 14}" y="{ly}">root</text>')
    svg.append(f'<rect x="{left + 70}" y="{ly - 9}" width="10" height="10" fill="{colors["user"]}"/><text x="{left + 84}" y="{ly}">unprivileged user</text>')
    svg.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(svg) + "\n")


def main():
    out, bench = sys.argv[1], sys.argv[2]
    meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(out, "meta.txt")))
    rss = {}
    for line in open(os.path.join(out, "rss.txt")):
        mode, label, kb = line.split()
        rss[(mode, label)] = int(kb)
    cg, cg_scope = {}, {}
    for line in open(os.path.join(out, "callgrind.txt")):
        mode, n, scope = line.split()
        cg[mode], cg_scope[mode] = int(n), scope
    baseline = {}
    bpath = os.path.join(bench, "callgrind-baseline.txt")
    if os.path.exists(bpath):
        for line in open(bpath):
            if line.strip() and not line.startswith("#"):
                k, v = line.split()
                baseline[k] = int(v)
    limit = float(meta["callgrind_limit"])

    md = ["# Benchmark results", ""]
    md.append(
        f"{meta['date']}, kernel {meta['kernel']} (Landlock ABI {meta['abi']}), {meta['cpu']}, "
        f"{meta['cores']} cores; landwall {meta['commit']}, hyperfine {meta['hyperfine']}, "
        f"bubblewrap {meta['bwrap']}. Load average {meta['load_start']} at the start and "
        f"{meta['load_end']} at the end. /etc has {meta['etc_entries']} entries, which root's "
        "policy grants one by one (see below)."
    )
    md.append("")
    md.append(
        "Produced by `make bench` (bench/wall.sh, bench/report.py). **Wall clock**: hyperfine "
        f"medians over {meta['rounds']} rounds of {meta['launch_runs']} runs per command for the "
        f"launches and {meta['rounds']} × {meta['fs_runs']} for the file system jobs; every command "
        "of a workload runs in each round, in a rotating order, and the ratios are to the direct "
        "run of the same rounds. **CPU**: the CPU time of each run (user + system of the process "
        "and what it execs, from wait4; the clock perf's task-clock reads), with every command "
        f"run in turn by bench/cpu-runs.c, {meta['cpu_runs']} times each for the launches: other "
        "work on the machine disturbs it much less than wall clock. Page faults: minor faults "
        "per run, median. landwall is the statically linked release build (static-pie, glibc) "
        "unless the row says dynamic. The minimal sandboxer grants the same paths (read-only: "
        "/usr /etc /opt /sys /proc; read-write: the worktree, /tmp, $HOME, /dev) in one layer; "
        "bubblewrap binds them; \"minimal sandboxer with landwall's own rules\" gets "
        "landwall's rule list for the same launch (`landwall policy --json`), path for path. "
        "As root, `find` under landwall skips the few mode-700 "
        "directories of /usr that root reads only with its capabilities, which landwall drops. "
        "Every run has no terminal, like a pipeline, so the shim installs no "
        "seccomp filter (it does when a terminal is within reach), and a private "
        "`$XDG_RUNTIME_DIR`, as a login session has, where the shim keeps the names of /etc's "
        "links between launches. † The shim on a terminal, and without `$XDG_RUNTIME_DIR` (a CI "
        "job: /etc is listed on every launch): cpu-runs gives each run a pseudo-terminal as its "
        "controlling terminal, or unsets the variable; hyperfine cannot, so the wall clock of "
        "those rows is cpu-runs', against cpu-runs' direct runs."
    )
    md.append("")

    # Targets.
    tgt = ["## Targets", "", "| target | root | unprivileged | met |", "|---|---:|---:|---|"]

    def both(f):
        return [f(m) for m, _ in MODES]

    yes = lambda ok: "yes" if ok else "**no**"
    shim_w = both(lambda m: ratio(out, m, "launch", "shim"))
    shim_c = both(lambda m: cpu_ratio(out, m, "launch", "shim"))
    bw_w = both(lambda m: ratio(out, m, "launch", "bwrap"))
    mini_w = both(lambda m: ratio(out, m, "launch", "minimal"))
    r500 = both(lambda m: ratio(out, m, "rules500", "shim"))
    r500_mini = both(lambda m: ratio(out, m, "rules500", "minimal"))
    same_w = both(lambda m: ratio(out, m, "launch", "minimal-same"))
    same_c = both(lambda m: cpu_ratio(out, m, "launch", "minimal-same"))
    r500_same = both(lambda m: ratio(out, m, "rules500", "minimal-same"))
    # landwall against the bare kernel cost of the very same rules: the issue's "no more
    # than a bare C sandboxer", with the policy held equal.
    over_same = both(lambda m: cpu_ratio(out, m, "launch", "shim") / cpu_ratio(out, m, "launch", "minimal-same"))
    fs = both(lambda m: fs_table(out, m)[1])
    rss_mib = both(lambda m: rss[(m, "shim")] / 1024)
    tgt.append(f"| launch ≤ 2.0× direct (wall) | {shim_w[0]:.2f}× | {shim_w[1]:.2f}× | {yes(max(shim_w) <= 2.0)} |")
    tgt.append(f"| … the same in CPU time | {shim_c[0]:.2f}× | {shim_c[1]:.2f}× | {yes(max(shim_c) <= 2.0)} |")
    tty_w = both(lambda m: cpu_wall_ratio(out, m, "launch", "shim@tty"))
    tty_c = both(lambda m: cpu_ratio(out, m, "launch", "shim@tty"))
    tgt.append(f"| … on a terminal, with the terminal filter (wall †, CPU) | {tty_w[0]:.2f}×, {tty_c[0]:.2f}× | {tty_w[1]:.2f}×, {tty_c[1]:.2f}× | {yes(max(tty_w + tty_c) <= 2.0)} |")
    cold_w = both(lambda m: cpu_wall_ratio(out, m, "launch", "shim@cold"))
    cold_c = both(lambda m: cpu_ratio(out, m, "launch", "shim@cold"))
    tgt.append(f"| … without `$XDG_RUNTIME_DIR`, as in a CI job (wall †, CPU) | {cold_w[0]:.2f}×, {cold_c[0]:.2f}× | {cold_w[1]:.2f}×, {cold_c[1]:.2f}× | {yes(max(cold_w + cold_c) <= 2.0)} |")
    tgt.append(f"| … for reference, the minimal C sandboxer (wall) | {mini_w[0]:.2f}× | {mini_w[1]:.2f}× | |")
    tgt.append(f"| … for reference, the minimal C sandboxer with landwall's own rules (wall, CPU) | {same_w[0]:.2f}×, {same_c[0]:.2f}× | {same_w[1]:.2f}×, {same_c[1]:.2f}× | |")
    tgt.append(f"| … the shim as a multiple of that (CPU) | {over_same[0]:.2f}× | {over_same[1]:.2f}× | |")
    tgt.append(f"| launch below bubblewrap in the same run (bubblewrap: {bw_w[0]:.2f}×, {bw_w[1]:.2f}×) | {shim_w[0]:.2f}× | {shim_w[1]:.2f}× | {yes(all(s < b for s, b in zip(shim_w, bw_w)))} |")
    tgt.append(f"| stretch: launch < 1.8× direct (wall) | {shim_w[0]:.2f}× | {shim_w[1]:.2f}× | {yes(max(shim_w) < 1.8)} |")
    tgt.append(f"| file system jobs within 3% of the minimal Landlock layer (CPU, worst job of shim and run) | {fs[0]['minimal']:.3f}× | {fs[1]['minimal']:.3f}× | {yes(max(f['minimal'] for f in fs) <= 1.03)} |")
    tgt.append(f"| … of the minimal layer with landwall's seccomp filter (CPU, worst) | {fs[0]['minimal-sc']:.3f}× | {fs[1]['minimal-sc']:.3f}× | {yes(max(f['minimal-sc'] for f in fs) <= 1.03)} |")
    tgt.append(f"| peak RSS of the shim ≤ 2 MiB | {rss_mib[0]:.2f} MiB | {rss_mib[1]:.2f} MiB | {yes(max(rss_mib) <= 2.0)} |")
    tgt.append(f"| launch with 500 extra rules ≤ 2.5× direct (wall) | {r500[0]:.2f}× | {r500[1]:.2f}× | {yes(max(r500) <= 2.5)} |")
    tgt.append(f"| … for reference, the minimal C sandboxer with the same 500 paths | {r500_mini[0]:.2f}× | {r500_mini[1]:.2f}× | |")
    tgt.append(f"| … and with landwall's own rules (its 500 and the default policy's) | {r500_same[0]:.2f}× | {r500_same[1]:.2f}× | |")
    cg_cells, cg_ok = [], True
    for m, _ in MODES:
        if m in baseline:
            f = cg[m] / baseline[m]
            cg_ok &= f <= limit
            cg_cells.append(f"{cg[m] / 1e6:.3f} M ({f:.2f}× baseline)")
        else:
            cg_cells.append(f"{cg[m] / 1e6:.3f} M (no baseline)")
    tgt.append(f"| callgrind: instructions of one shim launch ≤ {limit:.2f}× bench/callgrind-baseline.txt | {cg_cells[0]} | {cg_cells[1]} | {yes(cg_ok)} |")
    md += tgt + [""]
    md.append("![launch ratios](launch-ratios.svg)")
    md.append("")

    for mode, title in MODES:
        md.append(f"## Launch of `/bin/true`, {title}")
        md.append("")
        md += launch_table(out, mode, "launch")
        md.append("")
        md.append(f"### With 500 extra read-only rules, {title}")
        md.append("")
        md += launch_table(out, mode, "rules500")
        md.append("")
        md.append("bubblewrap with 500 bind mounts takes half a second a run: it ran 5 times a round and is left out of the CPU runs.")
        md.append("")
        md.append(f"### File system jobs, {title}")
        md.append("")
        md += fs_table(out, mode)[0]
        md.append("")

    md.append("## Peak memory")
    md.append("")
    md.append(
        "GNU time's `%M`, the largest of 20 runs: the maximum resident set over the "
        "process's life, so for a launcher it is the larger of its own peak before the exec "
        "and that of `/bin/true` after it. Most of the shim's is its own code, which the "
        "kernel maps around each page the launch touches (fault-around)."
    )
    md.append("")
    md.append("| command | root | unprivileged |")
    md.append("|---|---:|---:|")
    for label in ["direct", "shim", "run", "minimal"]:
        cells = [f"{rss[(m, label)] / 1024:.2f} MiB" for m, _ in MODES]
        md.append(f"| {LABELS[label]} | {cells[0]} | {cells[1]} |")
    md.append("")

    md.append("## Instruction count (callgrind)")
    md.append("")
    md.append(
        "One shim launch under `valgrind --tool=callgrind`, which counts the shim's "
        "instructions up to its exec: repeatable on a noisy machine, so `make bench` fails if "
        f"it grows more than {(limit - 1) * 100:.0f}% over bench/callgrind-baseline.txt "
        "(`BENCH_CALLGRIND_RECORD=1 bash bench/wall.sh` records a new one)."
    )
    if "hot_total" in meta:
        md.append("")
        md.append(
            f"The same runs name the functions a launch executes: {meta['hot_total']}, of which "
            f"{meta['hot_missing']} are missing from shim/hot-functions.txt, the order the "
            "release build lays the shim's code out in (make release-static; "
            "`BENCH_CALLGRIND_RECORD=1` rewrites the list)."
        )
    if "to-landlock" in cg_scope.values():
        md.append("")
        md.append(
            f"{meta.get('valgrind', 'This valgrind')} does not know the Landlock system calls "
            "(valgrind 3.22 added them): it answers ENOSYS, so the shim stops at the wall "
            "with status 100 and the count covers the launch up to its first Landlock call "
            "(start-up, configuration, agent lookup, worktree, policy, environment, "
            "capabilities, no_new_privs, the thread check), not the rules, the seccomp "
            "filter and the self-check, which are mostly system calls."
        )
    md.append("")
    md.append("| | root | unprivileged |")
    md.append("|---|---:|---:|")
    md.append("| this run | " + " | ".join(f"{cg[m]:,}" for m, _ in MODES) + " |")
    md.append("| baseline | " + " | ".join(f"{baseline[m]:,}" if m in baseline else "–" for m, _ in MODES) + " |")
    md.append("")

    drain = os.path.join(bench, "drain-results.md")
    if os.path.exists(drain):
        lines = open(drain).read().splitlines()
        md.append("## The drain daemon (bench/drain.sh)")
        md.append("")
        md += [l for l in lines if not l.startswith("# ")]
        md.append("")

    with open(os.path.join(bench, "results.md"), "w") as f:
        f.write("\n".join(md).rstrip("\n") + "\n")
    chart(out, os.path.join(bench, "launch-ratios.svg"))
    print("\n".join(tgt))
    print("callgrind: " + ", ".join(f"{m} {cg[m]:,} instructions" for m, _ in MODES))
    if not cg_ok:
        print(f"callgrind: more than {limit:.2f}× the baseline in bench/callgrind-baseline.txt", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
