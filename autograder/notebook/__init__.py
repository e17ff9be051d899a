"""The notebook stage: a student's notebook run in a worker, its checks judged, the executed notebook and
nbgrader's database written for formgrader."""
