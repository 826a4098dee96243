# Horizon 27 settings for the browser test (setup.sh copies this file into the venv as
# openstack_dashboard/local/local_settings.py). Everything that differs per run comes from
# the environment start.sh sets:
#   HORIZON_KEYSTONE_URL  the test Keystone's /v3 URL
#   HORIZON_STATIC_ROOT   where collectstatic put the static files (setup.sh's root)
#   HORIZON_SECRET_KEY    a random key per start (a fixed one for collectstatic)
import os

from openstack_dashboard.settings import HORIZON_CONFIG  # noqa: F401

DEBUG = True
ALLOWED_HOSTS = ['127.0.0.1', 'localhost']
SECRET_KEY = os.environ.get('HORIZON_SECRET_KEY', 'collectstatic-only-not-a-secret')

# DEBUG: django-compressor compresses on the fly into STATIC_ROOT/CACHE, so
# `manage.py compress` is not needed.
COMPRESS_ENABLED = True
COMPRESS_OFFLINE = False
STATIC_ROOT = os.environ.get('HORIZON_STATIC_ROOT', '/var/tmp/magnum-rs-horizon/static')
STATIC_URL = '/static/'

# One runserver process (--noreload), so the sessions can live in process memory. They get
# a cache of their own: LocMemCache keeps MAX_ENTRIES keys (300 by default) and culls a
# third when full, and django-compressor puts one key per static file into 'default' on the
# first page after login, which evicted the session (SessionInterrupted, a 400 on /project/).
CACHES = {
    'default': {'BACKEND': 'django.core.cache.backends.locmem.LocMemCache',
                'LOCATION': 'magnum-rs-horizon-default',
                'OPTIONS': {'MAX_ENTRIES': 100000}},
    'sessions': {'BACKEND': 'django.core.cache.backends.locmem.LocMemCache',
                 'LOCATION': 'magnum-rs-horizon-sessions',
                 'TIMEOUT': 3600,
                 'OPTIONS': {'MAX_ENTRIES': 100000}},
}
SESSION_ENGINE = 'django.contrib.sessions.backends.cache'
SESSION_CACHE_ALIAS = 'sessions'

OPENSTACK_KEYSTONE_URL = os.environ.get('HORIZON_KEYSTONE_URL', 'http://127.0.0.1:5000/v3')
OPENSTACK_KEYSTONE_MULTIDOMAIN_SUPPORT = False
OPENSTACK_KEYSTONE_DEFAULT_DOMAIN = 'Default'
OPENSTACK_KEYSTONE_DEFAULT_ROLE = 'member'
OPENSTACK_ENDPOINT_TYPE = 'publicURL'
# The catalogue has several regions with the same identity URL; at login openstack_auth
# takes the region of the first identity endpoint matching OPENSTACK_KEYSTONE_URL, which
# wins over DEFAULT_SERVICE_REGIONS. flow.js picks the region in the header's menu
# (/auth/switch_services_region/<region>/), as a user would.

TIME_ZONE = 'UTC'

# The real Neutron here runs ML2 without service plugins (no routers, no L3): the panels that
# would ask for them are off.
OPENSTACK_NEUTRON_NETWORK = {
    'enable_router': False,
    'enable_quotas': False,
    'enable_ipv6': False,
    'enable_distributed_router': False,
    'enable_ha_router': False,
    'enable_fip_topology_check': False,
    'enable_rbac_policy': False,
    'enable_auto_allocated_network': False,
}
OPENSTACK_CINDER_FEATURES = {'enable_backup': False}

LOGGING = {
    'version': 1,
    'disable_existing_loggers': False,
    'formatters': {'plain': {'format': '%(asctime)s %(levelname)s %(name)s %(message)s'}},
    'handlers': {'console': {'level': 'DEBUG', 'class': 'logging.StreamHandler',
                             'formatter': 'plain'}},
    # Something in the stack calls logging.basicConfig at DEBUG: the root logger stays quiet.
    'root': {'handlers': ['console'], 'level': 'WARNING'},
    'loggers': {
        'django.request': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'django.server': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'horizon': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'openstack_dashboard': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'openstack_auth': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'magnum_ui': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        # magnumclient logs each request's method, URL and status at DEBUG (no token: its
        # curl line masks X-Auth-Token)
        'magnumclient': {'handlers': ['console'], 'level': 'INFO', 'propagate': False},
        'keystoneauth': {'handlers': ['console'], 'level': 'WARNING', 'propagate': False},
    },
}
