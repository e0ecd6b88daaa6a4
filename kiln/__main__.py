from kiln.cli import main
import sys
sys.exit(main())
