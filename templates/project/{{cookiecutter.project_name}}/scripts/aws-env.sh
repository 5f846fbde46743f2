# shellcheck shell=bash
# Sourced by test.sh, demo.sh and moto.sh: the environment that points AWS clients at moto.

# aws_env_export PORT: exports the variables into the current shell.
aws_env_export() {
  local endpoint="http://127.0.0.1:$1"
  export AWS_ENDPOINT_URL="${endpoint}"
  export SQSAFE_TEST_ENDPOINT="${endpoint}"
  export AWS_ACCESS_KEY_ID=testing
  export AWS_SECRET_ACCESS_KEY=testing
  export AWS_REGION=us-east-1
  export AWS_DEFAULT_REGION=us-east-1
  unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN
}

# aws_env_exports PORT: prints the same as shell lines to copy.
aws_env_exports() {
  local endpoint="http://127.0.0.1:$1"
  cat <<ENV
export MOTO_PORT=$1
export AWS_ENDPOINT_URL=${endpoint}
export SQSAFE_TEST_ENDPOINT=${endpoint}
export AWS_ACCESS_KEY_ID=testing
export AWS_SECRET_ACCESS_KEY=testing
export AWS_REGION=us-east-1
export AWS_DEFAULT_REGION=us-east-1
unset AWS_PROFILE AWS_DEFAULT_PROFILE AWS_SESSION_TOKEN
ENV
}

# moto_up: starts moto (scripts/moto.sh start), exports the env, and stops moto when the
# calling shell exits (also on failure or Ctrl-C) unless it was already running before.
moto_up() {
  local root="$1"
  if bash "${root}/scripts/moto.sh" status >/dev/null 2>&1; then
    echo "moto already running (started outside this script): reusing it, leaving it running"
  else
    # shellcheck disable=SC2064  # expand the path now, on purpose
    trap "bash $(printf '%q' "${root}/scripts/moto.sh") stop" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
  bash "${root}/scripts/moto.sh" start
  local port
  port="$(cat "${root}/.run/moto.port")"
  aws_env_export "${port}"
}
