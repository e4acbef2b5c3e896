"""The audit: static rules over a solution's Python, C/C++/CUDA and YAML sources (audit.py's engine)."""
