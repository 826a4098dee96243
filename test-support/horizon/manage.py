# Django's entry point for Horizon: the horizon wheel has no manage.py (upstream keeps it in
# its source tree only), so setup.sh and start.sh run this one.
import os
import sys

from django.core.management import execute_from_command_line

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openstack_dashboard.settings")
    execute_from_command_line(sys.argv)
