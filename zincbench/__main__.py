from zincbench.cli import main

main()
