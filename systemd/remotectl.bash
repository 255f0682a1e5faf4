# bash completion for remotectl, Remote's operator command line.
# Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/remotectl.

_remotectl_chat_ids() {
    # Chat ids from the daemon, when it answers; nothing otherwise.
    local socket_args=() i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -socket | --socket | -config | --config)
                socket_args+=("${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}")
                ;;
        esac
    done
    remotectl "${socket_args[@]}" chat list --json 2>/dev/null |
        grep -o '"id": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/'
}

_remotectl() {
    local cur prev words cword
    if declare -F _init_completion >/dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local commands="info chat prompt tail providers help"
    local chat_commands="create list show rm fork"
    local global_flags="-socket -config -json -help"

    case $prev in
        -socket | --socket)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        -config | --config)
            COMPREPLY=($(compgen -f -X '!*.toml' -- "$cur") $(compgen -d -- "$cur"))
            return
            ;;
        -provider | --provider)
            COMPREPLY=($(compgen -W "claude codex minimax kimi antigravity" -- "$cur"))
            return
            ;;
        -cwd | --cwd)
            COMPREPLY=($(compgen -d -- "$cur"))
            return
            ;;
    esac

    # The command and subcommand, skipping flags and their values.
    local cmd="" sub="" i w
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        case $w in
            -socket | --socket | -config | --config | -provider | --provider | -cwd | --cwd | -project | --project | -model | --model | -title | --title)
                ((i++))
                ;;
            -*) ;;
            *)
                if [[ -z $cmd ]]; then
                    cmd=$w
                elif [[ -z $sub ]]; then
                    sub=$w
                fi
                ;;
        esac
    done

    if [[ $cur == -* ]]; then
        local flags=$global_flags
        case $cmd/$sub in
            chat/create) flags+=" -provider -project -cwd -model -title" ;;
            chat/fork) flags+=" -provider" ;;
        esac
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi

    case $cmd in
        "")
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            ;;
        chat)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "$chat_commands" -- "$cur"))
            elif [[ $sub == show || $sub == rm || $sub == fork ]]; then
                COMPREPLY=($(compgen -W "$(_remotectl_chat_ids)" -- "$cur"))
            fi
            ;;
        prompt | tail)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W "$(_remotectl_chat_ids)" -- "$cur"))
            fi
            ;;
        help)
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            ;;
    esac
}

complete -F _remotectl remotectl
