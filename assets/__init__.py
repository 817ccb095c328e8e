"""Package data the installed app needs: the stylesheet (styles/) and the demo study (demo/bundle/).

The repository's top-level assets/ folder, installed as the `workbench_assets` package (setup.py
maps it), where workbench/config.py finds it with importlib.resources, so a wheel, `pip install .`
or pipx gives a complete app. demo/ also holds the script that regenerates the bundle; only the
bundle ships.
"""
