from gpuwise.cli import main

main()
