from turnkit.cli import main

main()
