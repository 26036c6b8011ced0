from .cli._main import main

main()
