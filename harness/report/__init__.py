"""The output: the console and the JSON, the static HTML report, error maps, trace tables and plots."""
