#!/usr/bin/env python3
"""test_driver_model.py — the committed traces on the virtual backend, in the
default configuration: the driver time the ledger models for the cold pass
and for the warm passes, per event, must stay under a bar set from the cost
table (lib/backend/driver_costs.h).

usage: test_driver_model.py CARVE_REPLAY DRIVER_COSTS_H TRACE...

Only the modeled driver time and the call counts are checked: they are
deterministic (the same on any machine, under any load), while the host
time of a replay on a shared two-core machine is not, so no wall time is
ever compared with anything.

The bars, from the table (g: bringing one 2 MiB granule in as the mode does
today, one cuMemCreate, cuMemMap and cuMemRelease and a cuMemSetAccess's
share per mapping, 61 us on the 2026-11 H100 table; u: one cuMemUnmap's
share per mapping, 19 us):

  cold: at most g / 100 per event. A program must bring its peak into memory
    once; the traces bring in a granule every 73 to 1300 events (training
    allocates its peak fastest). Since untouched room comes in as mappings
    larger than a granule, of at most the stream's touched peak / 128
    (docs/design.md, "Mappings"), the cold pass pays per mapping, not per
    granule: 37 to 507 ns per event on these traces, encoder serving the
    worst (its peak, 510 MiB, gives pieces of two granules, and it trims
    and maps again granule by granule in its cold pass), where granule by
    granule cost 53 to 842. g / 100 (609 ns on the H100 table) is 1.2 x
    that worst. It was g / 160 with one mapping per request, which held
    encoder serving at 334 but let a buffer living in part of a freed
    mapping keep up to all of the request's memory mapped (footprint
    1.077 to 1.098 on three traces, against 1.033 to 1.048 granule by
    granule); the cap keeps the footprint and costs the cold pass that
    much. Mapping granule by granule again (842 on llm_train, 668 on
    resnet50) still fails it. Issue 23's aim is lower still: within
    1.25 x of segments mode's cold driver time, 2 to 94 ns per event
    here; docs/design.md has the table.
  warm: at most (g + u) / 1024 per event: one remap (a granule unmapped to
    map another) every 1024 events, 78 ns. Issue 23 asks the warm pass to
    stay within 1.5 x of segments mode's (87 to 155 ns per event on the H100,
    host time included, which carve's warm host time of 62 to 131 ns nearly
    fills): the driver may add about half of segments mode's own, tens of
    ns. Today encoder serving, the worst, models 49 ns.

The serving workloads of bench/traces/synthetic (gen_serving.py) are not
checked here yet: today they miss these bars by far (CNN serving with a
batch size per request on three streams: 19110 ns cold and 15213 warm; the
decoder: 190 and 127; docs/design.md, "Why memory still does not move" and
"Windows (measured)", says why), which is what the next policy is for (docs/design.md,
"The driver's cost"); run this script on them to see.

CARVE_TEST_DRIVER_WARM (default 2) sets the warm passes.
"""
import json
import os
import re
import subprocess
import sys

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL: " + what)


def read_table(path):
    """{kind: (per call, per mapping, per MiB)} in ns, from driver_costs.h."""
    table = {}
    for m in re.finditer(r"\[CARVE_DRV_(\w+)\]\s*=\s*\{\s*(\d+),\s*(\d+),\s*(\d+)\s*\}", open(path).read()):
        table[m.group(1)] = tuple(int(x) for x in m.groups()[1:])
    return table


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    replay, costs, traces = sys.argv[1], sys.argv[2], sys.argv[3:]
    t = read_table(costs)
    for kind in ("CREATE", "MAP", "RELEASE", "ACCESS", "UNMAP"):
        check(kind in t, "the cost table has %s" % kind)
    if failures:
        return 1
    gran = 2  # MiB

    def share(kind):  # what one 2 MiB mapping costs of a call covering many
        call, mapping, mib = t[kind]
        return mapping + gran * mib

    g = sum(t[k][0] + share(k) for k in ("CREATE", "MAP", "RELEASE")) + share("ACCESS")
    u = share("UNMAP")
    cold_bar, warm_bar = g / 100.0, (g + u) / 1024.0
    warm = int(os.environ.get("CARVE_TEST_DRIVER_WARM", "2"))
    print("bars from the table: g = %.1f us, u = %.1f us; cold <= %.1f ns/event, warm <= %.1f ns/event"
          % (g / 1e3, u / 1e3, cold_bar, warm_bar))
    print("%-28s %10s %10s %10s %10s %9s" % ("trace", "cold drv", "warm drv", "maps/pass", "unmaps", "footprint"))
    for path in traces:
        name = os.path.basename(path)
        p = subprocess.run([replay, "-q", "--json", "--warm", str(warm), path], capture_output=True, text=True)
        check(p.returncode == 0, "%s replays: %s" % (name, p.stderr.strip()))
        if p.returncode != 0:
            continue
        j = json.loads(p.stdout)
        cold, hot = j["driver_ns_per_event"], j["warm_driver_ns_per_event"]
        wc = j.get("warm_driver_calls_per_pass", {})
        print("%-28s %10.1f %10.1f %10.2f %10.2f %9.4f" % (name, cold, hot, wc.get("cuMemMap", 0),
                                                          wc.get("cuMemUnmap", 0), j["footprint_ratio"]))
        check(j["vmm"] == 1, "%s: the default mode on the virtual backend is virtual-memory mode" % name)
        # The model is live: the cold pass maps at least the trace's peak,
        # and pays for it.
        mapped = j["driver_bytes"].get("cuMemMap", 0)
        check(j["driver_calls"].get("cuMemMap", 0) > 0 and mapped >= j["peak_requested_bytes"] and cold > 0,
              "%s: the cold pass maps its peak (%d bytes: %d mapped) at a cost (%.1f ns/event)"
              % (name, j["peak_requested_bytes"], mapped, cold))
        check(cold <= cold_bar, "%s: cold driver time %.1f ns/event over the bar %.1f" % (name, cold, cold_bar))
        check(hot <= warm_bar, "%s: warm driver time %.1f ns/event over the bar %.1f" % (name, hot, warm_bar))
        check(j["num_errors"] == 0 and j["num_ooms"] == 0, "%s: no errors or OOMs" % name)
    print("%d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
