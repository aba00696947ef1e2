"""How a study runs and is reported: parameters and their rules, the catalog of studies, run folders and
manifests, papermill execution with progress, sweeps and their shards, findings, presentation, the HTML
report and index, the command line and the benchmarks. The science it runs lives beside it in models/,
runtimes/, compare/, studies/ and plots/."""
