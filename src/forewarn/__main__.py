from forewarn.cli import main

main()
