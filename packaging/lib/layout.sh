# shellcheck shell=bash disable=SC2034 # the scripts that source it use these
# Where an installed pdn-display lives and whose it is: the paths and the system users that
# install.sh makes and uninstall.sh removes, written once so that the two agree on what an
# install is. A --root DIR goes in front of each path when it is used. Sourced; it only sets
# variables.

PREFIX=/opt/pdn
CONFIG_DIR=/etc/pdn
STATE_DIR=/var/lib/pdn
UNIT_DIR=/etc/systemd/system
RELEASE_STATE_DIR=/var/lib/pdn-release
PDN_USER=pdn # the display's
SCHEDULER_USER=pdn-scheduler
CONTENT_USER=pdn-content
SENSOR_USER=pdn-sensor
