"""Package data the installed app needs: the stylesheet (styles/) and the demo study (demo/bundle/).

Found with importlib.resources (workbench/config.py), so a wheel, `pip install .` or pipx gives a
complete app. demo/ also holds the script that regenerates the bundle; only the bundle ships.
"""
