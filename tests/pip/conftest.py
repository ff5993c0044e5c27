# suite/ and script.py run inside the installed venv (with torch), not here.
collect_ignore = ["suite", "script.py"]
