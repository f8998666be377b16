// The screen: one Qt Quick scene (the window clears it to black), turned as configured, split
// into regions (Region.qml), each playing its own items with its own layer stack
// (layerstack.py). Without a layout one region, the main zone's, fills the screen; a layout
// (Python sets `mainBox` and `zones`) puts the main zone's region in its box and one more
// region per other zone in its box, stacked by their z. The main zone's region is declared
// here once and only moves when the layout changes: it plays on through every change. The
// other zones' regions are made by the Repeater from `zones` and handed to Python
// (`zoneHost.adoptRegion`) as they are made.
//
// On a video wall ([screen] wall, player/wall.py) `content` is the whole wall, laid out at the
// wall's size and moved so that this panel shows its tile; the panel (`panel`) clips it. A
// layout spans the wall (its boxes are fractions of the whole wall). The idle cover and the
// idle page are this display's own: laid over the main zone's part of this panel's tile only
// (each region's `tile`, still inside the region, so that every layer is a sibling of the
// others and z alone says which is in front).
pragma ComponentBehavior: Bound
import QtQuick

Item {
    id: stage

    // The main zone's region (the whole screen without a layout), for Python to take its
    // layers and hand it its layer stack.
    readonly property Item region: mainRegion

    // The main zone's box, in fractions of the screen (of the wall, on a video wall), and its z.
    property rect mainBox: Qt.rect(0, 0, 1, 1)
    property int mainZ: 0
    // The other zones of the layout on screen: [{name, x, y, width, height, z}], fractions.
    property var zones: []
    // The Python object the zones' regions are handed to (screenzones.py): `var`, as QML
    // cannot see its type.
    property var zoneHost: null

    // Clockwise rotation of the content on the panel: 0, 90, 180 or 270.
    property int turn: 0
    readonly property bool sideways: turn === 90 || turn === 270

    // The wall this panel is a tile of (1 x 1: no wall), and the gap between two panels'
    // pictures as a fraction of a panel's width (the same pixels between rows).
    property int wallColumns: 1
    property int wallRows: 1
    property int wallColumn: 0
    property int wallRow: 0
    property real wallBezel: 0.0

    // A box's edges in whole pixels of the content, so that two zones that touch share an
    // edge with no seam between them.
    function edge(fraction: real, size: real): real {
        return Math.round(fraction * size)
    }

    // The part of this panel's tile a region at `r` covers, in the region's own coordinates.
    function tileOf(r: rect): rect {
        const px = -content.x
        const py = -content.y
        const x0 = Math.max(px, r.x)
        const y0 = Math.max(py, r.y)
        const x1 = Math.min(px + panel.width, r.x + r.width)
        const y1 = Math.min(py + panel.height, r.y + r.height)
        return Qt.rect(x0 - r.x, y0 - r.y, Math.max(0, x1 - x0), Math.max(0, y1 - y0))
    }

    Item {
        id: panel
        objectName: "panel"
        anchors.centerIn: parent
        width: stage.sideways ? stage.height : stage.width
        height: stage.sideways ? stage.width : stage.height
        rotation: stage.turn
        clip: stage.wallColumns > 1 || stage.wallRows > 1

        Item {
            id: content
            readonly property real gap: stage.wallBezel * panel.width
            x: -stage.wallColumn * (panel.width + gap)
            y: -stage.wallRow * (panel.height + gap)
            width: stage.wallColumns * panel.width + (stage.wallColumns - 1) * gap
            height: stage.wallRows * panel.height + (stage.wallRows - 1) * gap

            Region {
                id: mainRegion
                x: stage.edge(stage.mainBox.x, content.width)
                y: stage.edge(stage.mainBox.y, content.height)
                width: stage.edge(stage.mainBox.x + stage.mainBox.width, content.width) - x
                height: stage.edge(stage.mainBox.y + stage.mainBox.height, content.height) - y
                z: stage.mainZ
                tile: stage.tileOf(Qt.rect(x, y, width, height))
            }

            Repeater {
                model: stage.zones
                delegate: Region {
                    id: zone
                    required property var modelData
                    x: stage.edge(zone.modelData.x, content.width)
                    y: stage.edge(zone.modelData.y, content.height)
                    width: stage.edge(zone.modelData.x + zone.modelData.width, content.width) - x
                    height: stage.edge(zone.modelData.y + zone.modelData.height, content.height) - y
                    z: zone.modelData.z
                    tile: stage.tileOf(Qt.rect(x, y, width, height))
                }
                onItemAdded: (index, item) => {
                    if (stage.zoneHost)
                        stage.zoneHost.adoptRegion(stage.zones[index].name, item)
                }
            }
        }
    }
}
