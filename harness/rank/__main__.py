"""`python -m harness.rank CMD_FD RESULT_FD RUN_FOLDER`: one rank of a solution, started by the judge
(harness/judge/group.py); the rank itself is harness/rank/worker.py."""
from harness.rank.worker import main

if __name__ == "__main__":
    main()
