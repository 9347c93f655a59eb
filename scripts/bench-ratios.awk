# Reads `go test -bench` output and prints, for every benchmark group that
# has a baseline sub-benchmark, each sibling's mean of every metric divided
# by the baseline's (ns/op, MB/s, and custom metrics such as write-reqs/GiB);
# a group with two baselines gets a line for each.
#   go test -bench . ./... | awk -f scripts/bench-ratios.awk
BEGIN { base["arrow-ipc"] = 1; base["naive-put-per-namespace"] = 1; base["raw-multipart-upload"] = 1; base["full-checkpoint"] = 1; base["map-baseline"] = 1; base["batch-256k-ceiling"] = 1; base["sequential-read"] = 1; base["pgx-copy"] = 1; base["bare"] = 1; base["list-and-read-markers"] = 1; base["decoder-all-cores"] = 1; base["pipeline-floor"] = 1; base["bare"] = 1 }
/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	if (!(name in seen)) { seen[name] = 1; order[++count] = name }
	for (i = 3; i < NF; i += 2) {
		unit = $(i + 1)
		if (unit == "B/op" || unit == "allocs/op") continue
		sum[name, unit] += $i; n[name, unit]++
		if (!((name, unit) in hasUnit)) { hasUnit[name, unit] = 1; units[name] = units[name] " " unit }
	}
}
END {
	for (i = 1; i <= count; i++) {
		name = order[i]; group = name; leaf = name
		sub(/\/[^\/]*$/, "", group); sub(/^.*\//, "", leaf)
		if (leaf in base) { isBase[name] = 1; baselines[group] = baselines[group] " " name }
	}
	for (i = 1; i <= count; i++) {
		name = order[i]; group = name; sub(/\/[^\/]*$/, "", group)
		if (!(group in baselines) || (name in isBase)) continue
		nb = split(baselines[group], bs, " ")
		for (k = 1; k <= nb; k++) {
			b = bs[k]
			nu = split(units[name], us, " ")
			line = sprintf("%-55s", name)
			for (j = 1; j <= nu; j++) {
				u = us[j]
				if (!((b, u) in n) || sum[b, u] == 0) continue
				line = line sprintf("  %s %.2fx", u, (sum[name, u] / n[name, u]) / (sum[b, u] / n[b, u]))
			}
			print line "  (vs " b ")"
		}
	}
}
