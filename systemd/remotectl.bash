# bash completion for remotectl, Remote's operator command line.
# Installed by `make install` as
# $(PREFIX)/share/bash-completion/completions/remotectl.

# Chat ids from the daemon (first column of `remotectl chat list`), with the
# same -socket/-config as the command line being completed; nothing when the
# daemon does not answer.
_remotectl_chat_ids() {
    local args=() i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -socket | --socket | -config | --config)
                args+=("${COMP_WORDS[i]}" "${COMP_WORDS[i + 1]}")
                ;;
        esac
    done
    remotectl "${args[@]}" chat list 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_remotectl() {
    local cur prev
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD - 1]}

    case $prev in
        -socket | --socket)
            COMPREPLY=($(compgen -f -- "$cur"))
            return
            ;;
        -config | --config)
            COMPREPLY=($(compgen -f -- "$cur"))
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
        -mode | --mode)
            COMPREPLY=($(compgen -W "default plan" -- "$cur"))
            return
            ;;
        -project | --project | -model | --model | -title | --title | -since | --since | -skill | --skill)
            return # free text
            ;;
    esac

    # The command, its subcommand and how many positional arguments follow,
    # skipping flags and their values.
    local cmd="" sub="" npos=0 i w
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case $w in
            -socket | --socket | -config | --config | -provider | --provider | -cwd | --cwd | \
                -mode | --mode | -project | --project | -model | --model | -title | --title | \
                -since | --since | -skill | --skill)
                ((i++))
                ;;
            -*) ;;
            *)
                if [[ -z $cmd ]]; then
                    cmd=$w
                elif [[ $cmd == chat && -z $sub ]]; then
                    sub=$w
                else
                    ((npos++))
                fi
                ;;
        esac
    done

    if [[ $cur == -* ]]; then
        local flags="-json"
        case $cmd/$sub in
            /) flags="-socket -config -json -raw -help" ;;
            chat/create) flags+=" -provider -project -cwd -model -title" ;;
            events/ | tail/) flags+=" -since -raw" ;;
            prompt/) flags="-mode -skill -raw" ;;
            chat/rm | cancel/) flags="" ;;
        esac
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi

    case $cmd in
        "")
            COMPREPLY=($(compgen -W "info providers chat events prompt tail cancel help" -- "$cur"))
            ;;
        chat)
            case $sub in
                "") COMPREPLY=($(compgen -W "create list show rm fork" -- "$cur")) ;;
                rm) COMPREPLY=($(compgen -W "$(_remotectl_chat_ids)" -- "$cur")) ;;
                show | fork)
                    ((npos == 0)) && COMPREPLY=($(compgen -W "$(_remotectl_chat_ids)" -- "$cur"))
                    ;;
            esac
            ;;
        events | prompt | tail | cancel)
            ((npos == 0)) && COMPREPLY=($(compgen -W "$(_remotectl_chat_ids)" -- "$cur"))
            ;;
    esac
}

complete -F _remotectl remotectl
