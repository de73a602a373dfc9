/* core/base/list.h: intrusive doubly-linked lists.  An item carries its own link fields, named
 * by the caller (so one item can sit on several lists); `head` (and `tail`) are lvalues.
 * Not thread-safe: a list belongs to whoever owns its head. */
#ifndef JUNCTION_BASE_LIST_H
#define JUNCTION_BASE_LIST_H

#include <stddef.h>

/* Put item first. */
#define BASE_DLIST_PUSH(head, item, prev, next)                                                    \
    do {                                                                                           \
        (item)->prev = NULL;                                                                       \
        (item)->next = (head);                                                                     \
        if (head)                                                                                  \
            (head)->prev = (item);                                                                 \
        (head) = (item);                                                                           \
    } while (0)

/* Put item last on a list that keeps a tail. */
#define BASE_DLIST_APPEND(head, tail, item, prev, next)                                            \
    do {                                                                                           \
        (item)->next = NULL;                                                                       \
        (item)->prev = (tail);                                                                     \
        if (tail)                                                                                  \
            (tail)->next = (item);                                                                 \
        else                                                                                       \
            (head) = (item);                                                                       \
        (tail) = (item);                                                                           \
    } while (0)

/* Take item off a list without a tail. */
#define BASE_DLIST_REMOVE(head, item, prev, next)                                                  \
    do {                                                                                           \
        if ((item)->prev)                                                                          \
            (item)->prev->next = (item)->next;                                                     \
        else                                                                                       \
            (head) = (item)->next;                                                                 \
        if ((item)->next)                                                                          \
            (item)->next->prev = (item)->prev;                                                     \
        (item)->prev = (item)->next = NULL;                                                        \
    } while (0)

/* Take item off a list that keeps a tail. */
#define BASE_DLIST_REMOVE_T(head, tail, item, prev, next)                                          \
    do {                                                                                           \
        if ((item)->prev)                                                                          \
            (item)->prev->next = (item)->next;                                                     \
        else                                                                                       \
            (head) = (item)->next;                                                                 \
        if ((item)->next)                                                                          \
            (item)->next->prev = (item)->prev;                                                     \
        else                                                                                       \
            (tail) = (item)->prev;                                                             \
        (item)->prev = (item)->next = NULL;                                                        \
    } while (0)

#endif
