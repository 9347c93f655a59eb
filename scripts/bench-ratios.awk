# Reads `go test -bench` output and prints, for every benchmark group that
# has a baseline sub-benchmark, the mean ns/op of each sibling divided by
# the baseline's. Baselines are the sub-benchmarks named in BASELINES.
#   go test -bench . ./... | awk -f scripts/bench-ratios.awk
BEGIN { split("arrow-ipc", names, " "); for (i in names) base[names[i]] = 1 }
/^Benchmark/ && / ns\/op/ {
	name = $1; sub(/-[0-9]+$/, "", name)
	for (i = 2; i <= NF; i++) if ($(i+1) == "ns/op") { ns = $i; break }
	sum[name] += ns; n[name]++
	if (!(name in seen)) { seen[name] = 1; order[++count] = name }
}
END {
	for (i = 1; i <= count; i++) {
		name = order[i]; group = name; leaf = name
		sub(/\/[^\/]*$/, "", group); sub(/^.*\//, "", leaf)
		if (leaf in base) baseline[group] = sum[name] / n[name]
	}
	for (i = 1; i <= count; i++) {
		name = order[i]; group = name; sub(/\/[^\/]*$/, "", group)
		mean = sum[name] / n[name]
		if (group in baseline && name != group)
			printf "%-40s %14.0f ns/op  %6.2fx baseline\n", name, mean, mean / baseline[group]
	}
}
