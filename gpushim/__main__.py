from gpushim.cli import main

main()
