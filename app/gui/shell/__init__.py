"""The shell of the desktop app: the entry point, the main window, its menus, the corpus-model and
"Inspect with" toolbars, the tabs that build panels on first use, and Help → About."""
